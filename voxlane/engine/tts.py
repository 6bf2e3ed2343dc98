"""The speech half of the engine: ``TtsCore.step(now)`` = collect the finished unit -> schedule -> execute.

Speech runs on its own execution thread (``voxlane-tts``) with its own onnxruntime thread count
(``--tts-threads``), apart from the Whisper workers: a burst of transcription cannot hold back speech,
nor the reverse. One unit runs at a time; which one is the scheduler's call (scheduler_tts.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from voxlane.engine.scheduler_tts import TtsScheduler, UnitWork
from voxlane.messages import SpeechAudio, SpeechUnit
from voxlane.runners.base import SpeechRunner

log = logging.getLogger(__name__)


@dataclass
class SpeechChunk:
    """A finished unit on its way out: the message and its PCM (frame 1)."""

    msg: SpeechAudio
    pcm: np.ndarray


class TtsCore:
    def __init__(
        self, runner: SpeechRunner, order: str = "deadline", on_done: Callable[[], None] = lambda: None
    ) -> None:
        self.runner = runner
        self.scheduler = TtsScheduler(order)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="voxlane-tts")
        self._running: Future[SpeechChunk] | None = None
        self._running_work: UnitWork | None = None
        self._finished = threading.Event()
        self._on_done = on_done

    def add(self, msg: SpeechUnit, now: float) -> None:
        self.scheduler.add(UnitWork(msg), now)

    def abort(self, request_id: str) -> None:
        """Drop the stream's queued units; the running one's audio is discarded. Idempotent."""
        self.scheduler.abort(request_id)

    def step(self, now: float) -> list[SpeechChunk]:
        outputs: list[SpeechChunk] = []
        if self._running is not None and self._running.done():
            work, future = self._running_work, self._running
            self._running = self._running_work = None
            assert work is not None
            chunk = future.result()
            audio_s = len(chunk.pcm) / chunk.msg.sample_rate if chunk.msg.sample_rate else 0.0
            alive = self.scheduler.deadline_of(work.request_id) is not None
            self.scheduler.done(work.request_id, audio_s, now, last=work.msg.last or chunk.msg.error is not None)
            if alive:
                outputs.append(chunk)
        if self._running is None:
            work = self.scheduler.next_unit(now)
            if work is not None:
                self._running_work = work
                self._running = self._executor.submit(self._execute, work.msg)
                self._running.add_done_callback(lambda _: self._on_done())
        return outputs

    @property
    def idle_with_work(self) -> bool:
        """True when ``step`` would start a unit right now."""
        return self._running is None and len(self.scheduler) > 0

    @property
    def busy(self) -> bool:
        return self._running is not None or len(self.scheduler) > 0

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _execute(self, unit: SpeechUnit) -> SpeechChunk:
        try:
            pcm, rate = self.runner.synthesize(unit)
            return SpeechChunk(SpeechAudio(unit.request_id, unit.index, rate), pcm)
        except Exception as exc:
            log.exception("speech unit %d of %s failed", unit.index, unit.request_id)
            reason = str(exc) if isinstance(exc, (OSError, ValueError)) else "the voice failed on this text"
            return SpeechChunk(SpeechAudio(unit.request_id, unit.index, 0, error=reason), np.empty(0, dtype=np.int16))
