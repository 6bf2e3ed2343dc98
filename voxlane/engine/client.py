"""The API process's side of the engine: starts the engine process and talks to it over ZMQ.

Sockets are bound here (ipc in a private temp dir) and the engine connects. Everything runs on the event
loop without blocking: sends go through zmq.asyncio, one task receives and dispatches results to the
requests waiting for them, one task watches that the engine process is alive.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import shutil
import tempfile
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator

import numpy as np
import zmq
import zmq.asyncio

from voxlane.config import ServerConfig
from voxlane.errors import EngineUnavailable, VoxlaneError
from voxlane.messages import (Abort, EngineFailed, Ready, Shutdown, SpeechAudio, SpeechUnit, TranscribeOptions,
                              WindowRequest, WindowResult, decode_output, encode_input)

log = logging.getLogger(__name__)

_WATCH_INTERVAL_S = 0.2


class EngineRequest:
    """One request's windows on their way to the engine and its results on their way back, in order."""

    def __init__(self, client: EngineClient, request_id: str, window_count: int, options: TranscribeOptions) -> None:
        self.client = client
        self.request_id = request_id
        self.window_count = window_count
        self.options = options
        self.received = 0
        self._results: asyncio.Queue[WindowResult | VoxlaneError] = asyncio.Queue()
        self._pending: dict[int, WindowResult] = {}
        self.finished = False

    async def send_window(self, index: int, offset_s: float, duration_s: float, features: np.ndarray,
                          n_frames: int, speech: list[tuple[float, float]] | None = None) -> None:
        self.client.check_alive()
        msg = WindowRequest(self.request_id, index, self.window_count, offset_s, duration_s, n_frames,
                            features.shape[0], self.options, speech)
        await self.client.send(encode_input(msg, features))

    async def results(self, timeout_s: float) -> AsyncIterator[WindowResult]:
        """Window results in index order. Raises EngineUnavailable if the engine dies or times out."""
        deadline = time.monotonic() + timeout_s
        next_index = 0
        while next_index < self.window_count:
            while next_index in self._pending:
                yield self._pending.pop(next_index)
                next_index += 1
            if next_index >= self.window_count:
                break
            try:
                item = await asyncio.wait_for(self._results.get(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise EngineUnavailable(
                    f"the engine did not finish this audio within {timeout_s:g} s (--request-timeout-s); "
                    "the server is overloaded: retry later"
                ) from None
            if isinstance(item, VoxlaneError):
                raise item
            self._pending[item.index] = item
        self.finished = True

    def deliver(self, item: WindowResult | VoxlaneError) -> None:
        if isinstance(item, WindowResult):
            self.received += 1
        self._results.put_nowait(item)


class SpeechStream:
    """One speech stream: its units on their way to the engine, their audio on its way back, in order."""

    def __init__(self, client: EngineClient, request_id: str) -> None:
        self.client = client
        self.request_id = request_id
        self.unit_count: int | None = None
        """Known once the last unit is sent."""
        self._results: asyncio.Queue[tuple[SpeechAudio, np.ndarray] | VoxlaneError] = asyncio.Queue()
        self._pending: dict[int, tuple[SpeechAudio, np.ndarray]] = {}
        self.finished = False

    async def send_unit(self, unit: SpeechUnit) -> None:
        self.client.check_alive()
        if unit.last:
            self.unit_count = unit.index + 1
        await self.client.send(encode_input(unit))

    async def audio(self, timeout_s: float) -> AsyncIterator[tuple[SpeechAudio, np.ndarray]]:
        """Each unit's audio in index order. Raises EngineUnavailable if the engine dies or times out, or
        the error a feeder delivered."""
        deadline = time.monotonic() + timeout_s
        next_index = 0
        while self.unit_count is None or next_index < self.unit_count:
            while next_index in self._pending:
                yield self._pending.pop(next_index)
                next_index += 1
            if self.unit_count is not None and next_index >= self.unit_count:
                break
            try:
                item = await asyncio.wait_for(self._results.get(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise EngineUnavailable(
                    f"the engine did not finish this speech within {timeout_s:g} s (--request-timeout-s); "
                    "the server is overloaded: retry later"
                ) from None
            if isinstance(item, VoxlaneError):
                raise item
            self._pending[item[0].index] = item
        self.finished = True

    def deliver(self, item: tuple[SpeechAudio, np.ndarray] | VoxlaneError) -> None:
        self._results.put_nowait(item)


class EngineClient:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.ready: Ready | None = None
        self.failure: str | None = None
        self._requests: dict[str, EngineRequest | SpeechStream] = {}
        self.speech_streams = 0
        self._queued_windows = 0
        self._dir = tempfile.mkdtemp(prefix="voxlane-")
        self._ctx = zmq.asyncio.Context()
        self._to_engine = self._ctx.socket(zmq.PUSH)
        self._from_engine = self._ctx.socket(zmq.PULL)
        self._to_engine.setsockopt(zmq.LINGER, 0)
        self._from_engine.setsockopt(zmq.LINGER, 0)
        self.input_addr = f"ipc://{self._dir}/input"
        self.output_addr = f"ipc://{self._dir}/output"
        self._to_engine.bind(self.input_addr)
        # Control messages (abort, shutdown) go out without awaiting, on the same underlying socket.
        self._control = zmq.Socket.shadow(self._to_engine.underlying)
        self._from_engine.bind(self.output_addr)
        self.process: multiprocessing.process.BaseProcess | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._ready_event = asyncio.Event()

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, timeout_s: float = 300.0) -> None:
        # Imported here, not at the top: the engine's modules load the model runtimes, which the API
        # process never needs (the spawned engine process imports them itself).
        from voxlane.engine.proc import run_engine

        ctx = multiprocessing.get_context("spawn")
        self.process = ctx.Process(
            target=run_engine,
            args=(self.config.engine, self.input_addr, self.output_addr, self.config.log_level),
            name="voxlane-engine",
            daemon=True,
        )
        self.process.start()
        self._tasks = [asyncio.create_task(self._receive(), name="voxlane-engine-receive"),
                       asyncio.create_task(self._watch(), name="voxlane-engine-watch")]
        try:
            await asyncio.wait_for(self._ready_event.wait(), timeout_s)
        except TimeoutError:
            self.failure = f"the engine did not start within {timeout_s:g} s"
        if self.failure:
            raise RuntimeError(self.failure)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.process is not None and self.process.is_alive():
            try:
                self._control.send_multipart(encode_input(Shutdown()), flags=zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            deadline = time.monotonic() + 1.0
            while self.process.is_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if self.process.is_alive():
                self.process.kill()
            self.process.join(0.5)
        self._fail_all(EngineUnavailable("the server is shutting down"))
        self._ctx.destroy(linger=0)
        shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def healthy(self) -> bool:
        return self.ready is not None and self.failure is None and self.process is not None and self.process.is_alive()

    def check_alive(self) -> None:
        if not self.healthy:
            raise EngineUnavailable(f"the engine is not running ({self.failure or 'starting'}); retry later")

    @property
    def queued_windows(self) -> int:
        return self._queued_windows

    @property
    def is_multilingual(self) -> bool:
        return bool(self.ready and self.ready.is_multilingual)

    @property
    def n_mels(self) -> int:
        return self.ready.n_mels if self.ready else 80

    # --- requests --------------------------------------------------------------------------------

    @asynccontextmanager
    async def request(self, request_id: str, window_count: int,
                      options: TranscribeOptions) -> AsyncIterator[EngineRequest]:
        """Reserve queue room for a request's windows; on exit (done, failed, cancelled or the client
        gone) release it, and abort in the engine whatever is unfinished."""
        self.check_alive()
        limit = self.config.max_queued_windows
        if self._queued_windows + window_count > limit:
            raise EngineUnavailable(
                f"the engine queue is full ({self._queued_windows} of {limit} windows waiting, "
                f"this audio needs {window_count}; --max-queued-windows): retry later",
                code="queue_full",
            )
        req = EngineRequest(self, request_id, window_count, options)
        self._requests[request_id] = req
        self._queued_windows += window_count
        try:
            yield req
        finally:
            self._requests.pop(request_id, None)
            self._queued_windows -= window_count
            if not req.finished and self.healthy:
                try:
                    self._control.send_multipart(encode_input(Abort(request_id)), flags=zmq.NOBLOCK)
                except zmq.ZMQError:
                    log.warning("could not send abort for %s", request_id)

    @asynccontextmanager
    async def speech(self, request_id: str) -> AsyncIterator[SpeechStream]:
        """A speech stream; on exit (done, failed, cancelled or the client gone) abort what is unfinished."""
        self.check_alive()
        limit = self.config.max_speech_streams
        if self.speech_streams >= limit:
            raise EngineUnavailable(
                f"{self.speech_streams} speech streams are running, the server's limit (--max-speech-streams "
                f"{limit}): retry later", code="queue_full",
            )
        stream = SpeechStream(self, request_id)
        self._requests[request_id] = stream
        self.speech_streams += 1
        try:
            yield stream
        finally:
            self._requests.pop(request_id, None)
            self.speech_streams -= 1
            if not stream.finished and self.healthy:
                try:
                    self._control.send_multipart(encode_input(Abort(request_id)), flags=zmq.NOBLOCK)
                except zmq.ZMQError:
                    log.warning("could not send abort for %s", request_id)

    async def send(self, frames: list[bytes | memoryview]) -> None:
        await self._to_engine.send_multipart(frames, copy=False)

    # --- background tasks ------------------------------------------------------------------------

    async def _receive(self) -> None:
        while True:
            frames = await self._from_engine.recv_multipart()
            try:
                msg, pcm = decode_output(frames)
            except Exception:
                log.exception("malformed message from the engine")
                continue
            if isinstance(msg, WindowResult):
                req = self._requests.get(msg.request_id)
                if isinstance(req, EngineRequest):
                    req.deliver(msg)
                else:
                    log.debug("dropping result for gone request %s", msg.request_id)
            elif isinstance(msg, SpeechAudio):
                stream = self._requests.get(msg.request_id)
                if isinstance(stream, SpeechStream):
                    assert pcm is not None
                    stream.deliver((msg, pcm))
            elif isinstance(msg, Ready):
                self.ready = msg
                self._ready_event.set()
            elif isinstance(msg, EngineFailed):
                self.failure = msg.reason
                self._ready_event.set()

    async def _watch(self) -> None:
        assert self.process is not None
        while self.process.is_alive():
            await asyncio.sleep(_WATCH_INTERVAL_S)
        code = self.process.exitcode
        if self.failure is None:
            self.failure = f"the engine process exited (code {code})"
        log.error("%s; failing %d request(s)", self.failure, len(self._requests))
        self._ready_event.set()
        self._fail_all(EngineUnavailable(f"the engine stopped ({self.failure}): retry later"))

    def _fail_all(self, error: EngineUnavailable) -> None:
        for req in list(self._requests.values()):
            req.deliver(error)
