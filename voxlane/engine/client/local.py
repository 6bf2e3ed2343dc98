"""EngineClient: the client of the local engine process, the routes' handle on it in ``voxlane serve``
(``EngineHandle``): admits requests (``EngineFront``, by the rules of admission.py), sends their work over
ZMQ, routes each result the engine sends back to the stream of the request it belongs to, and supervises
the engine process: when it dies, every open stream fails at once with a 503 that says when to retry, and a
new engine starts after a backoff (``RestartPolicy``), until a crash loop makes the server give up.

Two background tasks run on the event loop: one receives and routes, one watches the engine process and
restarts it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from voxlane.config import ServerConfig
from voxlane.engine.client.front import EngineFront
from voxlane.engine.client.handle import EngineHandle
from voxlane.engine.client.streams import ResultStream
from voxlane.engine.client.supervisor import EngineProcess, RestartPolicy
from voxlane.engine.client.transport import EngineSocket
from voxlane.errors import EngineUnavailable, ModelInUse
from voxlane.messages import (
    Abort,
    EngineFailed,
    EngineStats,
    LoadModel,
    ModelLoaded,
    ModelUnloaded,
    ProbeVoice,
    Ready,
    Shutdown,
    SpeakerResult,
    SpeakerWindow,
    SpeechAudio,
    SpeechUnit,
    UnloadModel,
    VoiceProbed,
    WindowRequest,
    WindowResult,
)

log = logging.getLogger(__name__)


class EngineStartFailed(RuntimeError):
    """The engine's first start failed; the message is the engine's reason (a model that does not load,
    --device cuda without a usable GPU), written for the operator."""


class EngineClient(EngineFront):
    def __init__(
        self,
        config: ServerConfig,
        launch: Callable[[ServerConfig, str, str], EngineProcess] = EngineProcess,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.policy = RestartPolicy.from_config(config)
        self.socket = EngineSocket()
        self._launch = launch
        self.process = launch(config, self.socket.input_addr, self.socket.output_addr)
        self._on_restart = on_restart
        self._receiver: asyncio.Task[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._ready_event = asyncio.Event()
        self._start_failure: str | None = None
        """What the engine reported (EngineFailed) when it could not load its models."""
        self._start_timeout_s = 300.0

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, timeout_s: float = 300.0) -> None:
        """Start the engine and wait until it has loaded its models, then watch it: from here on a dead engine
        is started again (see ``_supervise``). Raises EngineStartFailed with the reason if the first start fails."""
        self._start_timeout_s = timeout_s
        self.failure = await self._boot()
        if self.failure is not None:
            raise EngineStartFailed(self.failure)
        self._supervisor = asyncio.create_task(self._supervise(), name="voxlane-engine-supervisor")

    async def close(self) -> None:
        self.state = "stopped"
        for task in (self._supervisor, self._receiver):
            if task is not None:
                task.cancel()
        if self.process.alive:
            self.socket.send_now(Shutdown())
            await self.process.stop(grace_s=1.0)
        self._fail_all(EngineUnavailable("the server is shutting down"))
        self.socket.close()

    @property
    def healthy(self) -> bool:
        return self.state == "ready" and self.process.alive

    @property
    def is_multilingual(self) -> bool:
        return bool(self.ready and self.ready.is_multilingual)

    @property
    def diarize_problem(self) -> str | None:
        """Why this engine cannot diarize (no speaker encoder), or None when it can."""
        if self.ready is None:
            return "the engine is not ready"
        return self.ready.speakers

    @property
    def count_check(self) -> bool:
        return bool(self.ready and self.ready.count_check)

    @property
    def speaker_fbank(self) -> bool:
        return bool(self.ready and self.ready.speaker_fbank)

    @property
    def check_fbank(self) -> bool:
        return bool(self.ready and self.ready.check_fbank)

    @property
    def n_mels(self) -> int:
        return self.ready.n_mels if self.ready else 80

    async def load_model(self, model: str, wait_s: float) -> None:
        """Return once the engine has the Whisper model in directory ``model`` loaded: at once when its latest
        stats say so (a window of a model unloaded since then makes the engine load it again), else after it
        answers a ``LoadModel``. A model still loading after ``wait_s`` is a 503 with Retry-After (its load goes
        on); one that cannot load is a 503 that says why."""
        self.check_alive()
        known = self.models.get(model)
        if known is not None and known.loaded:
            return
        stream = ResultStream[ModelLoaded](f"load-{uuid.uuid4().hex}", 1, "loading this model")
        began = time.monotonic()
        async with self._open(stream, ModelLoaded, abort=False):  # nothing to abort: the load is wanted anyway
            await self.send(LoadModel(stream.request_id, model))
            try:
                async for answer in stream.results(wait_s):
                    if answer.error is not None:
                        raise EngineUnavailable(answer.error, code="model_load_failed")
                    return
            except EngineUnavailable as exc:
                if exc.code != "engine_unavailable" or not self.healthy:
                    raise
                retry_s = max(1, math.ceil(self.expected_load_s(model) - (time.monotonic() - began)))
                raise EngineUnavailable(
                    f"the model is still loading after {wait_s:g} s (--model-load-wait-s); retry in {retry_s} s",
                    code="model_loading",
                    retry_after_s=retry_s,
                ) from None

    async def unload_model(self, model: str, timeout_s: float) -> bool:
        """Have the engine unload the Whisper model in directory ``model`` now; whether it was loaded. Raises
        ModelInUse (409) when the engine refuses (the default model, or work in flight on it), and
        EngineUnavailable when it has not answered within ``timeout_s``."""
        self.check_alive()
        stream = ResultStream[ModelUnloaded](f"unload-{uuid.uuid4().hex}", 1, "unloading this model")
        async with self._open(stream, ModelUnloaded, abort=False):  # an unload is done at once: nothing to abort
            await self.send(UnloadModel(stream.request_id, model))
            async for answer in stream.results(timeout_s):
                if answer.refused is not None:
                    raise ModelInUse(f"the model stays loaded: {answer.refused}")
                return answer.was_loaded
            raise EngineUnavailable("the engine closed the unload without an answer")

    def expected_load_s(self, model: str) -> float:
        """How long a load of ``model`` should take: its past loads' mean, else that of all models, else 5 s."""
        states = list(self.models.values())
        mine = [m for m in states if m.model == model and m.loads]
        for pool in (mine, [m for m in states if m.loads and m.load_seconds > 0]):
            if pool:
                return sum(m.load_seconds for m in pool) / sum(m.loads for m in pool)
        return 5.0

    # --- sending ---------------------------------------------------------------------------------

    async def send(
        self,
        msg: WindowRequest | SpeakerWindow | SpeechUnit | ProbeVoice | LoadModel | UnloadModel,
        features: np.ndarray | None = None,
    ) -> None:
        """Send one window (with its log-mel ``features``) or one speech unit of an open stream."""
        self.check_alive()
        try:
            await self.socket.send(msg, features)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling() == 0:
                # Not this task's cancellation: the engine died and its socket closed under this send.
                raise self.unavailable() from None
            raise

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

    def _close(self, stream: ResultStream[Any], abort: bool) -> None:
        if abort and not stream.finished and self.healthy and not self.socket.send_now(Abort(stream.request_id)):
            log.warning("could not send abort for %s", stream.request_id)

    # --- background tasks ------------------------------------------------------------------------

    async def _boot(self) -> str | None:
        """Start ``self.process`` and wait until it is ready. None once it is; else why not: it reported a
        failure, exited, or has not become ready within the start timeout."""
        self._start_failure = None
        self._ready_event.clear()
        began = time.monotonic()
        self.process.start()
        self._receiver = asyncio.create_task(self._receive(self.socket), name="voxlane-engine-receive")
        exited = asyncio.create_task(self.process.wait_exit(), name="voxlane-engine-start-watch")
        ready = asyncio.create_task(self._ready_event.wait())
        try:
            await asyncio.wait({exited, ready}, timeout=self._start_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            ready.cancel()
        if self._start_failure is not None:
            return self._start_failure
        if not self._ready_event.is_set():
            if exited.done() and not exited.cancelled():
                return f"the engine process exited while starting (code {exited.result()})"
            return f"the engine did not start within {self._start_timeout_s:g} s"
        self._load_s = time.monotonic() - began
        self.state = "ready"
        self.failure = None
        return None

    async def _supervise(self) -> None:
        """Wait for the engine to die; fail what waits on it; start a new one after the policy's backoff, on
        new sockets (nothing sent to or from the dead one can reach the next); give up on a crash loop."""
        while True:
            code = await self.process.wait_exit()
            reason = f"the engine process exited (code {code})"
            while True:
                delay = self.policy.on_death(time.monotonic())
                self._bury(reason, delay)
                if delay is None:
                    return
                await asyncio.sleep(delay)
                self.process = self._launch(self.config, self.socket.input_addr, self.socket.output_addr)
                self.restarts += 1
                self.stats = None  # the new engine's counters start from zero
                if self._on_restart is not None:
                    self._on_restart()
                log.warning("starting engine process again (restart %d)", self.restarts)
                failed_start = await self._boot()
                if failed_start is None:
                    log.warning(
                        "the engine is serving again after restart %d (loaded in %.1f s)", self.restarts, self._load_s
                    )
                    break
                reason = failed_start
                await self.process.stop(grace_s=0.0)  # one that timed out is still there

    def _bury(self, reason: str, delay_s: float | None) -> None:
        """The engine is gone: fail every open stream, and swap in fresh sockets for the next one."""
        now = time.monotonic()
        if delay_s is None:
            self.state = "failed"
            self.failure = (
                f"{reason}; it died {self.policy.recent_deaths} times within "
                f"{self.policy.window_s:g} s (--engine-crash-loop-deaths, --engine-crash-loop-window-s)"
            )
            log.error(
                "the engine is crash-looping, not restarting it: %s; failing %d request(s)",
                self.failure,
                len(self._streams),
            )
            error = self.unavailable()
        else:
            self.state = "restarting"
            self.failure = reason
            self._next_start_at = now + delay_s
            log.error("%s; failing %d request(s); restarting it in %.1f s", reason, len(self._streams), delay_s)
            retry_s = self.retry_after_s(now)
            error = EngineUnavailable(f"the engine stopped ({reason}): retry in {retry_s} s", retry_after_s=retry_s)
        if self._receiver is not None:
            self._receiver.cancel()
        self._fail_all(error)
        dead, self.socket = self.socket, EngineSocket()
        dead.close()

    async def _receive(self, socket: EngineSocket) -> None:
        while True:
            msg, pcm = await socket.recv()
            if isinstance(msg, (WindowResult, SpeakerResult, SpeechAudio, VoiceProbed, ModelLoaded, ModelUnloaded)):
                entry = self._streams.get(msg.request_id)
                if entry is None or not isinstance(msg, entry[0]):
                    log.debug("dropping a %s for gone request %s", type(msg).__name__, msg.request_id)
                elif isinstance(msg, WindowResult):
                    self.admission.done(msg.request_id, msg.index, time.monotonic())
                    entry[1].put(msg.index, msg)
                elif isinstance(msg, SpeakerResult):
                    entry[1].put(msg.index, msg)
                elif isinstance(msg, SpeechAudio):
                    assert pcm is not None
                    self.admission.done(msg.request_id, msg.index, time.monotonic())
                    entry[1].put(msg.index, (msg, pcm))
                else:
                    entry[1].put(0, msg)
            elif isinstance(msg, EngineStats):
                self.stats = msg
            elif isinstance(msg, Ready):
                self.ready = msg
                self._ready_event.set()
            elif isinstance(msg, EngineFailed):
                self._start_failure = msg.reason
                self._ready_event.set()


_is_a_handle: type[EngineHandle] = EngineClient  # mypy checks that the server can hold it
