"""EngineClient: the routes' one handle on the engine: admits requests (by the rules of admission.py),
sends their work, routes each result the engine sends back to the stream of the request it belongs to, and
fails every open stream when the engine dies.

Two background tasks run on the event loop: one receives and routes, one watches the engine process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import numpy as np

from voxlane.config import ServerConfig
from voxlane.engine.client.admission import Admission
from voxlane.engine.client.streams import ResultStream
from voxlane.engine.client.supervisor import EngineProcess
from voxlane.engine.client.transport import EngineSocket
from voxlane.errors import EngineUnavailable, QueueFull
from voxlane.messages import (
    Abort,
    EngineFailed,
    ProbeVoice,
    Ready,
    Shutdown,
    SpeechAudio,
    SpeechUnit,
    VoiceProbed,
    WindowRequest,
    WindowResult,
)

log = logging.getLogger(__name__)

SpeechResult = tuple[SpeechAudio, np.ndarray]
"""One speech unit's audio: the message and its mono int16 PCM."""


class EngineClient:
    def __init__(
        self, config: ServerConfig, launch: Callable[[ServerConfig, str, str], EngineProcess] = EngineProcess
    ) -> None:
        self.config = config
        self.ready: Ready | None = None
        self.failure: str | None = None
        self.socket = EngineSocket()
        self.process = launch(config, self.socket.input_addr, self.socket.output_addr)
        self.admission = Admission(
            max_transcriptions=config.max_transcription_requests,
            max_audio_s=config.max_queued_audio_s,
            max_windows=config.max_queued_windows,
            max_speech_streams=config.max_speech_streams,
            max_speech_chars=config.max_queued_speech_chars,
        )
        self.long_decodes = asyncio.Semaphore(max(1, config.audio_preprocess_workers - 1))
        """Uploads decoded past their first step (long audio) at once: one audio worker stays free for the
        short jobs of other requests (routes/transcriptions.py)."""
        self._streams: dict[str, tuple[type, ResultStream[Any]]] = {}
        """Open streams by request id, with the type of message their results come in."""
        self._tasks: list[asyncio.Task[None]] = []
        self._ready_event = asyncio.Event()

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, timeout_s: float = 300.0) -> None:
        """Start the engine and wait until it has loaded its models. Raises RuntimeError with the reason."""
        self.process.start()
        self._tasks = [
            asyncio.create_task(self._receive(), name="voxlane-engine-receive"),
            asyncio.create_task(self._watch(), name="voxlane-engine-watch"),
        ]
        try:
            await asyncio.wait_for(self._ready_event.wait(), timeout_s)
        except TimeoutError:
            self.failure = f"the engine did not start within {timeout_s:g} s"
        if self.failure:
            raise RuntimeError(self.failure)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.process.alive:
            self.socket.send_now(Shutdown())
            await self.process.stop(grace_s=1.0)
        self._fail_all(EngineUnavailable("the server is shutting down"))
        self.socket.close()

    @property
    def healthy(self) -> bool:
        return self.ready is not None and self.failure is None and self.process.alive

    def check_alive(self) -> None:
        if not self.healthy:
            raise EngineUnavailable(f"the engine is not running ({self.failure or 'starting'}); retry later")

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
    def is_multilingual(self) -> bool:
        return bool(self.ready and self.ready.is_multilingual)

    @property
    def n_mels(self) -> int:
        return self.ready.n_mels if self.ready else 80

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

    async def send(self, msg: WindowRequest | SpeechUnit | ProbeVoice, features: np.ndarray | None = None) -> None:
        """Send one window (with its log-mel ``features``) or one speech unit of an open stream."""
        self.check_alive()
        await self.socket.send(msg, features)

    async def probe_voice(self, model_path: str, config_path: str, timeout_s: float) -> VoiceProbed:
        """Have the engine load a voice and make it speak (off its scheduling loop). Raises EngineUnavailable
        when the engine is down, dies before it answers, or has not answered within ``timeout_s``."""
        self.check_alive()
        stream = ResultStream[VoiceProbed](f"probe-{uuid.uuid4().hex}", 1, "checking this voice")
        # Nothing to abort: a probe holds no engine state, and a late verdict is dropped here.
        async with self._open(stream, VoiceProbed, abort=False):
            await self.send(ProbeVoice(stream.request_id, model_path, config_path))
            async for verdict in stream.results(timeout_s):
                return verdict
            raise EngineUnavailable("the engine closed the voice check without a verdict")

    @asynccontextmanager
    async def _open(
        self, stream: ResultStream[Any], kind: type, abort: bool = True
    ) -> AsyncIterator[ResultStream[Any]]:
        self._streams[stream.request_id] = (kind, stream)
        try:
            yield stream
        finally:
            self._streams.pop(stream.request_id, None)
            if abort and not stream.finished and self.healthy and not self.socket.send_now(Abort(stream.request_id)):
                log.warning("could not send abort for %s", stream.request_id)

    # --- background tasks ------------------------------------------------------------------------

    async def _receive(self) -> None:
        while True:
            msg, pcm = await self.socket.recv()
            if isinstance(msg, (WindowResult, SpeechAudio, VoiceProbed)):
                entry = self._streams.get(msg.request_id)
                if entry is None or not isinstance(msg, entry[0]):
                    log.debug("dropping a %s for gone request %s", type(msg).__name__, msg.request_id)
                elif isinstance(msg, WindowResult):
                    self.admission.done(msg.request_id, msg.index, time.monotonic())
                    entry[1].put(msg.index, msg)
                elif isinstance(msg, SpeechAudio):
                    assert pcm is not None
                    self.admission.done(msg.request_id, msg.index, time.monotonic())
                    entry[1].put(msg.index, (msg, pcm))
                else:
                    entry[1].put(0, msg)
            elif isinstance(msg, Ready):
                self.ready = msg
                self._ready_event.set()
            elif isinstance(msg, EngineFailed):
                self.failure = msg.reason
                self._ready_event.set()

    async def _watch(self) -> None:
        code = await self.process.wait_exit()
        if self.failure is None:
            self.failure = f"the engine process exited (code {code})"
        log.error("%s; failing %d request(s)", self.failure, len(self._streams))
        self._ready_event.set()
        self._fail_all(EngineUnavailable(f"the engine stopped ({self.failure}): retry later"))

    def _fail_all(self, error: EngineUnavailable) -> None:
        for _, stream in list(self._streams.values()):
            stream.fail(error)
