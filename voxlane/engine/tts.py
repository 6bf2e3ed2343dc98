"""The speech half of the engine: ``TtsCore.step(now, asr_busy)`` = collect finished units -> schedule -> execute.

Speech runs on its own execution threads (``voxlane-tts_N``, one per slot, ``--tts-slots``), apart from the
Whisper workers: a burst of transcription cannot hold back speech, nor the reverse. Each slot has its own
runner (its own onnxruntime sessions, ``--tts-threads`` threads each), and the slots run units of different
streams at once; which unit runs next is the scheduler's call (scheduler_tts.py), and a stream's units never
run two at a time, so they stay in order.

The core budget follows the work:
- while Whisper windows are queued or running, only ``--tts-mixed-slots`` slots are used, so ASR keeps the
  rest of the cores;
- a unit that would run alone (no other unit running or waiting, no ASR work) runs on the solo runner, one
  session with ``--tts-solo-threads`` threads: one stream's units cannot use two slots, so its unit gets
  all the cores instead, and its first audio comes sooner.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np

from voxlane.engine.scheduler_tts import COST_HEADROOM, TtsScheduler, UnitWork
from voxlane.messages import SpeechAudio, SpeechUnit
from voxlane.runners.base import SpeechRunner

log = logging.getLogger(__name__)


@dataclass
class SpeechChunk:
    """A finished unit on its way out: the message and its PCM (frame 1)."""

    msg: SpeechAudio
    pcm: np.ndarray


@dataclass(eq=False)
class _Running:
    work: UnitWork
    future: Future[SpeechChunk]
    runner: SpeechRunner


class TtsCore:
    def __init__(
        self,
        runners: Sequence[SpeechRunner],
        order: str = "deadline",
        on_done: Callable[[], None] = lambda: None,
        mixed_slots: int | None = None,
        solo_runner: SpeechRunner | None = None,
        cost_headroom: float = COST_HEADROOM,
    ) -> None:
        """``runners``: one per slot (a runner is used by one thread at a time). ``mixed_slots``: slots
        used while ASR has work (default: all). ``solo_runner``: runs a unit that runs alone (None: off).
        ``cost_headroom``: the scheduler's (scheduler_tts.py)."""
        if not runners:
            raise ValueError("TtsCore needs at least one speech runner")
        self.scheduler = TtsScheduler(order, cost_headroom)
        self.slots = len(runners)
        self.mixed_slots = min(self.slots, mixed_slots or self.slots)
        self._free: list[SpeechRunner] = list(runners)
        self._solo = solo_runner
        self._executor = ThreadPoolExecutor(self.slots, thread_name_prefix="voxlane-tts")
        self._running: list[_Running] = []
        self._finished: queue.SimpleQueue[_Running] = queue.SimpleQueue()
        self._on_done = on_done
        self.solo_units = 0
        """Units run on the solo runner since start."""

    def add(self, msg: SpeechUnit, now: float) -> None:
        self.scheduler.add(UnitWork(msg), now)

    def abort(self, request_id: str) -> None:
        """Drop the stream's queued units; the running one's audio is discarded. Idempotent."""
        self.scheduler.abort(request_id)

    def capacity(self, asr_busy: bool) -> int:
        """Slots usable now."""
        return self.mixed_slots if asr_busy else self.slots

    def step(self, now: float, asr_busy: bool = False) -> list[SpeechChunk]:
        outputs: list[SpeechChunk] = []
        while True:
            try:
                done = self._finished.get_nowait()
            except queue.Empty:
                break
            self._running.remove(done)
            if done.runner is not self._solo:
                self._free.append(done.runner)
            chunk = done.future.result()
            audio_s = len(chunk.pcm) / chunk.msg.sample_rate if chunk.msg.sample_rate else 0.0
            rid = done.work.request_id
            alive = self.scheduler.deadline_of(rid) is not None
            last = done.work.msg.last or chunk.msg.error is not None
            self.scheduler.done(rid, audio_s, now, last=last, learn_cost=done.runner is not self._solo)
            if alive:
                outputs.append(chunk)
        capacity = self.capacity(asr_busy)
        self.scheduler.slots = capacity
        while len(self._running) < capacity and self._free:
            work = self.scheduler.next_unit(now)
            if work is None:
                break
            runner = self._pick_runner(asr_busy)
            running = _Running(work, self._executor.submit(self._execute, runner, work.msg), runner)
            self._running.append(running)
            running.future.add_done_callback(partial(self._unit_done, running))
        return outputs

    def _pick_runner(self, asr_busy: bool) -> SpeechRunner:
        """The solo runner for a unit that runs alone with the cores idle, else a free slot's runner."""
        if self._solo is not None and not asr_busy and not self._running and not self.scheduler.has_ready():
            self.solo_units += 1
            return self._solo
        return self._free.pop()

    def _unit_done(self, running: _Running, _: Future[SpeechChunk]) -> None:
        self._finished.put(running)
        self._on_done()

    def idle_with_work(self, asr_busy: bool = False) -> bool:
        """True when ``step`` would start a unit right now (a free slot, a ready unit)."""
        return len(self._running) < self.capacity(asr_busy) and bool(self._free) and self.scheduler.has_ready()

    @property
    def busy(self) -> bool:
        return bool(self._running) or len(self.scheduler) > 0

    @property
    def running(self) -> int:
        return len(self._running)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _execute(self, runner: SpeechRunner, unit: SpeechUnit) -> SpeechChunk:
        try:
            pcm, rate, marks = runner.synthesize(unit)
            return SpeechChunk(SpeechAudio(unit.request_id, unit.index, rate, marks=marks), pcm)
        except Exception as exc:
            log.exception("speech unit %d of %s failed", unit.index, unit.request_id)
            reason = str(exc) if isinstance(exc, (OSError, ValueError)) else "the voice failed on this text"
            return SpeechChunk(SpeechAudio(unit.request_id, unit.index, 0, error=reason), np.empty(0, dtype=np.int16))
