"""EngineReplica: one engine replica of the Ray Serve deployment. It owns a local voxlane engine, the same
engine process and ``EngineClient`` (with its supervisor and admission) as ``voxlane serve``, and serves
one window, one speaker window (the speaker embeddings of a diarized transcription's window or reference
clip, on the engine's speaker thread) or one speech unit per call.

Each call is its own engine request (``<request id>-<index>``): the windows of one transcription and the
units of one speech stream are independent work for the engine (no window reads another's text), so Ray may
send them to different replicas, and a replica needs no state kept between calls. A call that fails in
the engine comes back as a ``ReplicaError`` value (status, message, Retry-After), never as a raised
exception, so that the ingress rebuilds the same OpenAI error it would have raised itself.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import msgspec
import numpy as np

from voxlane.config import ServerConfig
from voxlane.engine.client import EngineClient, SpeechResult
from voxlane.errors import EngineUnavailable, QueueFull, VoxlaneError
from voxlane.messages import (
    Ready,
    SpeakerResult,
    SpeakerWindow,
    SpeechUnit,
    VoiceProbed,
    WindowRequest,
    WindowResult,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplicaError:
    """A ``VoxlaneError`` on its way back from a replica, as plain values (an exception's own pickling
    would drop its keyword arguments)."""

    status_code: int
    message: str
    code: str | None = None
    retry_after_s: int | None = None

    @classmethod
    def of(cls, exc: VoxlaneError) -> ReplicaError:
        return cls(exc.status_code, exc.message, exc.code, exc.retry_after_s)

    def error(self) -> VoxlaneError:
        if self.status_code == QueueFull.status_code:
            return QueueFull(self.message, retry_after_s=self.retry_after_s or 1, code=self.code)
        if self.status_code == EngineUnavailable.status_code:
            return EngineUnavailable(self.message, code=self.code, retry_after_s=self.retry_after_s)
        return VoxlaneError(self.message, code=self.code)


class EngineReplica:
    """The body of the ``VoxlaneEngine`` deployment (``deploy.py`` wraps it with ``serve.deployment``)."""

    async def __init__(self, config: ServerConfig) -> None:  # type: ignore[misc]  # Ray awaits an async constructor
        self.config = config
        self.engine = EngineClient(config)
        await self.engine.start()  # on the replica's event loop thread: the engine dies with it (PDEATHSIG)
        log.info("voxlane engine replica ready in process %d", os.getpid())

    def ready(self) -> Ready:
        """What this replica's engine serves (model, languages, mel bins); the ingress asks once at start."""
        assert self.engine.ready is not None
        return self.engine.ready

    async def window(self, msg: WindowRequest, features: np.ndarray) -> WindowResult | ReplicaError:
        """Transcribe one window (its log-mel ``features``); the result carries the caller's id and index."""
        local_id = f"{msg.request_id}-{msg.index}"
        try:
            async with self.engine.request(local_id, [msg.duration_s]) as stream:
                await self.engine.send(msgspec.structs.replace(msg, request_id=local_id, index=0, count=1), features)
                async for result in stream.results(self.config.request_timeout_s):
                    return msgspec.structs.replace(result, request_id=msg.request_id, index=msg.index)
        except VoxlaneError as exc:
            return ReplicaError.of(exc)
        return ReplicaError(500, "the engine closed the window without a result")

    async def speaker(self, msg: SpeakerWindow, mel: np.ndarray) -> SpeakerResult | ReplicaError:
        """Embed one speaker window's speech regions (its speaker ``mel``) in this replica's engine, where its
        speaker encoder runs; the result carries the caller's id and index."""
        local_id = f"{msg.request_id}-{msg.index}"
        try:
            async with self.engine.speakers(local_id, 1) as stream:
                await self.engine.send(msgspec.structs.replace(msg, request_id=local_id, index=0, count=1), mel)
                async for result in stream.results(self.config.request_timeout_s):
                    return msgspec.structs.replace(result, request_id=msg.request_id, index=msg.index)
        except VoxlaneError as exc:
            return ReplicaError.of(exc)
        return ReplicaError(500, "the engine closed the speaker window without a result")

    async def unit(self, msg: SpeechUnit) -> SpeechResult | ReplicaError:
        """Speak one unit (a sentence or clause, already phonemised): its audio message and int16 PCM."""
        local_id = f"{msg.request_id}-{msg.index}"
        try:
            async with self.engine.speech(local_id, [len(msg.phoneme_ids)]) as stream:
                await self.engine.send(msgspec.structs.replace(msg, request_id=local_id, index=0, last=True))
                async for audio, pcm in stream.results(self.config.request_timeout_s):
                    return msgspec.structs.replace(audio, request_id=msg.request_id, index=msg.index), pcm
        except VoxlaneError as exc:
            return ReplicaError.of(exc)
        return ReplicaError(500, "the engine closed the speech unit without audio")

    async def probe(self, model_path: str, config_path: str, timeout_s: float) -> VoiceProbed | ReplicaError:
        """Load a voice and make it speak (POST /v1/audio/voices). The paths must be readable on this node."""
        try:
            return await self.engine.probe_voice(model_path, config_path, timeout_s)
        except VoxlaneError as exc:
            return ReplicaError.of(exc)

    def check_health(self) -> None:
        """Ray's health check: a replica whose engine the supervisor gave up on (a crash loop) is replaced.
        An engine being restarted is still healthy: its supervisor is on it."""
        if self.engine.state == "failed":
            raise RuntimeError(f"the engine failed: {self.engine.failure}")

    async def __del__(self) -> None:
        # Ray calls this after the replica's drain (its calls in flight finished, or
        # graceful_shutdown_timeout_s passed): stop the engine process with it.
        await self.engine.close()
