"""EngineFront: what both engine clients keep in front of their engine, whatever carries the work to it:
admission (the bounded queues of admission.py), the open result streams by request id, and the serving
state with the 503 it implies. ``EngineClient`` (local.py) and ``RayEngineClient`` (voxlane/serve_ray) each
add their transport: how a stream opens and closes (``_open``), how work is sent, how the engine starts.
"""

from __future__ import annotations

import asyncio
import math
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from voxlane.config import ServerConfig
from voxlane.engine.client.admission import Admission
from voxlane.engine.client.handle import EngineState, SpeechResult
from voxlane.engine.client.streams import ResultStream
from voxlane.errors import EngineUnavailable, QueueFull
from voxlane.messages import EngineStats, ModelState, Ready, SpeakerResult, SpeechAudio, WindowResult


class EngineFront(ABC):
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.ready: Ready | None = None
        """What the engine said it serves (model, languages, mel bins); kept across restarts (same model)."""
        self.state: EngineState = "starting"
        self.failure: str | None = None
        """Why the engine is not serving: the last death, or why the server gave up on it."""
        self.refusal: EngineUnavailable | None = None
        """Once the server has stopped serving (``stop_serving``): the 503 for any work still coming."""
        self.restarts = 0
        """Engine processes started after the first one died."""
        self.stats: EngineStats | None = None
        """The engine's latest counters (it sends them about once a second), for /metrics."""
        self.admission = Admission.from_config(config)
        self.long_decodes = asyncio.Semaphore(max(1, config.audio_preprocess_workers - 1))
        """Uploads decoded past their first step (long audio) at once: one audio worker stays free for the
        short jobs of other requests (routes/transcriptions.py)."""
        self._streams: dict[str, tuple[type, ResultStream[Any]]] = {}
        """Open streams by request id, with the type of message their results come in."""
        self._load_s = 0.0
        """How long the last start took until the engine was ready: what a restart is expected to take."""
        self._next_start_at = 0.0
        """When the restart under way starts (or started) its process, in time.monotonic() seconds."""

    # --- state -----------------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        return self.state == "ready"

    def check_alive(self) -> None:
        if not self.healthy:
            raise self.unavailable()

    def stop_serving(self, error: EngineUnavailable) -> None:
        """The server is closing with requests in flight (its drain timed out): fail every open stream with
        ``error``, and any work still coming, so that each request answers it now (a 503 with the server's
        reason) instead of being cut off by the shutdown. The engine itself stops in ``close``."""
        self.state = "stopped"
        self.refusal = error
        self._fail_all(error)

    def unavailable(self) -> EngineUnavailable:
        """The 503 for work that arrives while the engine is not serving; it says when to come back."""
        if self.state == "failed":
            return EngineUnavailable(
                f"the engine is down and the server stopped restarting it ({self.failure}); "
                "the server needs restarting (see its log)"
            )
        if self.state == "stopped":
            return self.refusal or EngineUnavailable("the server is shutting down")
        retry_s = self.retry_after_s()
        what = "restarting" if self.state == "restarting" else "not running"
        why = self.failure or ("starting" if self.state == "starting" else "it has just stopped")
        return EngineUnavailable(f"the engine is {what} ({why}); retry in {retry_s} s", retry_after_s=retry_s)

    def retry_after_s(self, now: float | None = None) -> int:
        """Whole seconds until the engine should serve again: the backoff left plus the last load time."""
        now = time.monotonic() if now is None else now
        return max(1, math.ceil(max(self._next_start_at, now) + self._load_s - now))

    @property
    def queued_windows(self) -> int:
        return round(self.admission.windows.queued)

    @property
    def queued_audio_s(self) -> float:
        """Seconds of audio admitted and not yet transcribed."""
        return self.admission.audio.queued

    @property
    def queued_speech_chars(self) -> int:
        return round(self.admission.chars.queued)

    @property
    def speech_streams(self) -> int:
        return self.admission.speech_streams

    @property
    def models(self) -> dict[str, ModelState]:
        """The Whisper models the engine has loaded since it started, by directory (its latest stats)."""
        return {m.model: m for m in self.stats.models} if self.stats is not None and self.healthy else {}

    # --- requests --------------------------------------------------------------------------------

    @contextmanager
    def transcription(self) -> Iterator[None]:
        """One transcription request, from its upload to its answer: raises QueueFull when the server has
        --max-transcription-requests at once or its queues are already full (before any decoding)."""
        self.admission.start_transcription()
        try:
            yield
        finally:
            self.admission.end_transcription()

    def audio_room_s(self) -> float:
        """Seconds of audio with sound the queue takes now (infinite while it is empty): the decode's budget."""
        return self.admission.audio_room_s()

    def audio_full(self, need_s: float) -> QueueFull:
        return self.admission.audio_full(need_s)

    def check_windows(self, durations_s: Sequence[float]) -> None:
        """Raises QueueFull when a transcription of windows of these durations would not be admitted now."""
        self.admission.check_windows(durations_s)

    @asynccontextmanager
    async def request(self, request_id: str, durations_s: Sequence[float]) -> AsyncIterator[ResultStream[WindowResult]]:
        """Reserve queue room for a transcription's windows (their durations in seconds, in order; QueueFull
        when it has none); each window's room is freed as its result comes back, and on exit (done, failed,
        cancelled or the client gone) the rest, and whatever is unfinished is aborted in the engine."""
        self.check_alive()
        self.admission.admit_windows(request_id, durations_s, time.monotonic())
        try:
            async with self._open(
                ResultStream[WindowResult](request_id, len(durations_s), "this audio"), WindowResult
            ) as stream:
                yield stream
        finally:
            self.admission.release(request_id)

    @asynccontextmanager
    async def speakers(self, request_id: str, count: int) -> AsyncIterator[ResultStream[SpeakerResult]]:
        """The speaker embeddings of a diarized transcription's ``count`` windows and reference clips (their
        queue room is the transcription's own, taken by ``request``); on exit what is unfinished is aborted."""
        self.check_alive()
        async with self._open(
            ResultStream[SpeakerResult](request_id, count, "the speaker embeddings"), SpeakerResult
        ) as stream:
            yield stream

    def check_speech(self, chars: int) -> None:
        """Raises QueueFull when a speech request of ``chars`` characters would not be admitted now."""
        self.admission.check_speech(chars)

    @asynccontextmanager
    async def speech(self, request_id: str, unit_chars: Sequence[int]) -> AsyncIterator[ResultStream[SpeechResult]]:
        """A speech stream of units of ``unit_chars`` characters (QueueFull when there is no room for it); on
        exit (done, failed, cancelled or the client gone) abort in the engine what is unfinished."""
        self.check_alive()
        self.admission.admit_speech(request_id, unit_chars, time.monotonic())
        try:
            async with self._open(
                ResultStream[SpeechResult](request_id, len(unit_chars), "this speech"), SpeechAudio
            ) as stream:
                yield stream
        finally:
            self.admission.end_speech(request_id)

    @asynccontextmanager
    async def _open(
        self, stream: ResultStream[Any], kind: type, abort: bool = True
    ) -> AsyncIterator[ResultStream[Any]]:
        """Hold ``stream`` open (its results come as messages of type ``kind``); on exit, close it and (with
        ``abort``) stop in the engine whatever of it is unfinished (``_close``)."""
        self._streams[stream.request_id] = (kind, stream)
        try:
            yield stream
        finally:
            self._streams.pop(stream.request_id, None)
            self._close(stream, abort)

    @abstractmethod
    def _close(self, stream: ResultStream[Any], abort: bool) -> None:
        """Stop in the engine what ``stream`` left unfinished, once it is closed."""

    def _fail_all(self, error: EngineUnavailable) -> None:
        for _, stream in list(self._streams.values()):
            stream.fail(error)
