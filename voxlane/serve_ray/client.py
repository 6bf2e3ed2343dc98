"""RayEngineClient: the routes' engine client on the Ray path. An ``EngineHandle`` like ``EngineClient`` (the
routes, errors and SSE streaming do not know which one they hold), and an ``EngineFront`` like it (the same
admission and streams), with Ray Serve's deployment handle where ``EngineClient`` has its ZMQ socket and
its engine process.

Admission (the bounded queues, 429 + Retry-After) stays here, at the ingress, as on the direct path. Each
window, speech unit or speaker window (a diarized transcription's) that a route sends is one call on the
``VoxlaneEngine`` deployment: Ray picks the
replica (the least loaded of two at random), and the call's result is put on the request's stream. A
replica that dies under its calls fails them with a 503 and ``Retry-After`` (Ray sends the next calls to
the replicas left, and starts a new one); a stream left early (done, failed, the client gone) cancels its
calls still in flight, which Ray passes on to the replica, whose engine aborts the work.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from voxlane.config import ServerConfig
from voxlane.engine.client import EngineFront, EngineHandle, ResultStream
from voxlane.errors import EngineUnavailable, InvalidRequest, QueueFull, VoxlaneError
from voxlane.messages import SpeakerWindow, SpeechUnit, VoiceProbed, WindowRequest
from voxlane.serve_ray.replica import ReplicaError

log = logging.getLogger(__name__)

REPLICA_LOST_RETRY_AFTER_S = 1
"""Retry-After of a call whose replica died under it: Ray routes the retry to the replicas left at once."""
START_TIMEOUT_S = 300.0


class RayEngineClient(EngineFront):
    def __init__(
        self, config: ServerConfig, handle: DeploymentHandle, on_restart: Callable[[], None] | None = None
    ) -> None:
        # restarts stays 0 and on_restart goes unused: Ray restarts replicas out of the ingress's sight.
        super().__init__(config)
        self.handle = handle
        self._calls: dict[str, set[asyncio.Task[None]]] = {}
        """Calls in flight on the engine replicas, by request id."""

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Ask an engine replica what it serves (model, languages, mel bins); Ray has started them all by
        the time the ingress starts, so this is one round trip."""
        try:
            self.ready = await asyncio.wait_for(self.handle.ready.remote(), timeout_s)
        except Exception as exc:
            raise RuntimeError(f"no engine replica answered within {timeout_s:g} s: {exc!r}") from exc
        self.state = "ready"

    async def close(self) -> None:
        self.state = "stopped"
        for calls in list(self._calls.values()):
            for call in calls:
                call.cancel()
        self._fail_all(EngineUnavailable("the server is shutting down"))

    @property
    def diarize_problem(self) -> str | None:
        """Why the replicas cannot diarize (the one that answered at start has no speaker encoder), or None."""
        if self.ready is None:
            return "no engine replica is ready"
        return self.ready.speakers

    @property
    def count_check(self) -> bool:
        """Whether the replica that answered at start has the count check's encoder."""
        return bool(self.ready and self.ready.count_check)

    @property
    def speaker_fbank(self) -> bool:
        """Whether the replicas' regions' encoder reads the filterbanks (CAM++), not just the mel."""
        return bool(self.ready and self.ready.speaker_fbank)

    @property
    def check_fbank(self) -> bool:
        """Whether the replicas' count check's encoder reads only the filterbanks (CAM++)."""
        return bool(self.ready and self.ready.check_fbank)

    async def send(self, msg: WindowRequest | SpeakerWindow | SpeechUnit, features: np.ndarray | None = None) -> None:
        """Send one window (with its log-mel ``features``), one speaker window (with its speaker mel) or one
        speech unit of an open stream to a replica; returns at once, and the replica's answer goes to the
        stream."""
        self.check_alive()
        entry = self._streams.get(msg.request_id)
        if entry is None:
            return  # the stream is gone: its calls are cancelled
        call = asyncio.create_task(self._call(entry[1], msg, features), name=f"voxlane-ray-{msg.request_id[:8]}")
        calls = self._calls.setdefault(msg.request_id, set())
        calls.add(call)
        call.add_done_callback(calls.discard)

    async def load_model(self, model: str, wait_s: float) -> None:
        """On Ray each engine replica loads a model on its first window of it (no bounded wait here)."""

    async def unload_model(self, model: str, timeout_s: float) -> bool:
        """Each replica holds its own models and Ray routes a call to one of them, so no call reaches them all."""
        raise InvalidRequest(
            "unloading a model is not served on Ray Serve (--ray-address): each engine replica unloads an idle "
            "model after --model-ttl-s, or to make room within --max-loaded-models",
            param="model",
            code="unload_not_served",
        )

    async def probe_voice(self, model_path: str, config_path: str, timeout_s: float) -> VoiceProbed:
        self.check_alive()
        try:
            verdict = await asyncio.wait_for(self.handle.probe.remote(model_path, config_path, timeout_s), timeout_s)
        except TimeoutError:
            raise EngineUnavailable(f"no engine replica checked the voice within {timeout_s:g} s") from None
        except Exception as exc:
            raise _lost(exc) from None
        if isinstance(verdict, ReplicaError):
            raise verdict.error()
        return verdict

    async def _call(
        self, stream: ResultStream[Any], msg: WindowRequest | SpeakerWindow | SpeechUnit, features: Any
    ) -> None:
        try:
            if isinstance(msg, WindowRequest):
                result = await self.handle.window.remote(msg, features)
            elif isinstance(msg, SpeakerWindow):
                result = await self.handle.speaker.remote(msg, features)
            else:
                result = await self.handle.unit.remote(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            stream.fail(_lost(exc))
            return
        if isinstance(result, ReplicaError):
            stream.fail(result.error())
            return
        if not isinstance(msg, SpeakerWindow):  # a speaker window's queue room is its transcription's
            self.admission.done(msg.request_id, msg.index, time.monotonic())
        stream.put(msg.index, result)

    def _close(self, stream: ResultStream[Any], abort: bool) -> None:
        for call in self._calls.pop(stream.request_id, set()):
            call.cancel()  # Ray cancels it on the replica too, whose engine aborts the work


_is_a_handle: type[EngineHandle] = RayEngineClient  # mypy checks that the server can hold it


def _lost(exc: Exception) -> VoxlaneError:
    """The error for a call that Ray could not complete: its replica died or was full."""
    if isinstance(exc, BackPressureError):
        return QueueFull(
            "every engine replica has --max-ongoing-per-replica calls and Ray's queue for them is full; retry later",
            retry_after_s=REPLICA_LOST_RETRY_AFTER_S,
        )
    log.warning("an engine replica call failed: %s", exc.__class__.__name__)
    return EngineUnavailable(
        f"the engine replica serving this request stopped ({exc.__class__.__name__}); "
        f"retry in {REPLICA_LOST_RETRY_AFTER_S} s (another replica takes it)",
        retry_after_s=REPLICA_LOST_RETRY_AFTER_S,
    )
