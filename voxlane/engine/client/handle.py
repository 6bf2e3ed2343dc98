"""EngineHandle: the engine as the API side uses it, what the routes, the realtime session, the metrics and the
app's lifespan call on it. ``EngineClient`` (local.py: one engine process over ZMQ) and ``RayEngineClient``
(voxlane/serve_ray/client.py: engine replicas through Ray Serve) both satisfy it, so the server holds either
one without knowing which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from voxlane.engine.client.streams import ResultStream
from voxlane.errors import EngineUnavailable, QueueFull
from voxlane.messages import (
    EngineStats,
    ModelState,
    SpeakerResult,
    SpeakerWindow,
    SpeechAudio,
    SpeechUnit,
    VoiceProbed,
    WindowRequest,
    WindowResult,
)

EngineState = Literal["starting", "ready", "restarting", "failed", "stopped"]

SpeechResult = tuple[SpeechAudio, np.ndarray]
"""One speech unit's audio: the message and its mono int16 PCM."""


@runtime_checkable
class EngineHandle(Protocol):
    """The engine client the server holds (``ServerState.engine``)."""

    # --- lifecycle: the app's lifespan ------------------------------------------------------------

    async def start(self) -> None:
        """Return once the engine serves; raises when it cannot start."""
        ...

    async def close(self) -> None: ...

    def stop_serving(self, error: EngineUnavailable) -> None:
        """Fail every open stream, and any work still coming, with ``error`` (the drain timed out)."""
        ...

    # --- state: health, metrics and /v1/models ----------------------------------------------------

    @property
    def state(self) -> EngineState: ...

    @property
    def restarts(self) -> int: ...

    @property
    def stats(self) -> EngineStats | None:
        """The engine's latest counters, for /metrics; None when there are none."""
        ...

    @property
    def healthy(self) -> bool: ...

    @property
    def models(self) -> dict[str, ModelState]:
        """The Whisper models the engine has loaded, by directory."""
        ...

    @property
    def diarize_problem(self) -> str | None:
        """Why this engine cannot diarize, or None when it can."""
        ...

    @property
    def count_check(self) -> bool:
        """Whether the engine embeds the speaker count check's stretches (``SpeakerWindow.check``)."""
        ...

    @property
    def speaker_fbank(self) -> bool:
        """Whether the engine's regions' encoder reads a window's filterbanks (``Ready.speaker_fbank``)."""
        ...

    @property
    def check_fbank(self) -> bool:
        """Whether the count check's encoder reads only a stretch's filterbanks (``Ready.check_fbank``)."""
        ...

    @property
    def queued_windows(self) -> int: ...

    @property
    def speech_streams(self) -> int: ...

    @property
    def long_decodes(self) -> asyncio.Semaphore:
        """Uploads decoded past their first step (long audio) at once."""
        ...

    def check_alive(self) -> None:
        """Raises ``unavailable()`` when the engine is not serving."""
        ...

    def unavailable(self) -> EngineUnavailable:
        """The 503 for work that arrives while the engine is not serving; it says when to come back."""
        ...

    async def load_model(self, model: str, wait_s: float) -> None:
        """Return once the engine has the Whisper model in directory ``model`` loaded."""
        ...

    async def unload_model(self, model: str, timeout_s: float) -> bool:
        """Unload the Whisper model in directory ``model`` now; whether it was loaded. ModelInUse (409) when the
        engine refuses: the default model, or work in flight on it."""
        ...

    # --- admission: each raises QueueFull (429) when there is no room -----------------------------

    def transcription(self) -> AbstractContextManager[None]:
        """One transcription request, from its upload to its answer."""
        ...

    def audio_room_s(self) -> float: ...

    def audio_full(self, need_s: float) -> QueueFull: ...

    def check_windows(self, durations_s: Sequence[float]) -> None: ...

    def check_speech(self, chars: int) -> None: ...

    # --- streams: open one, send its work, read its results in order ------------------------------

    def request(
        self, request_id: str, durations_s: Sequence[float]
    ) -> AbstractAsyncContextManager[ResultStream[WindowResult]]:
        """A transcription's windows (their durations in seconds, in order), admitted for the stream's life."""
        ...

    def speakers(self, request_id: str, count: int) -> AbstractAsyncContextManager[ResultStream[SpeakerResult]]:
        """The speaker embeddings of a diarized transcription's ``count`` windows and reference clips."""
        ...

    def speech(
        self, request_id: str, unit_chars: Sequence[int]
    ) -> AbstractAsyncContextManager[ResultStream[SpeechResult]]:
        """A speech stream of units of ``unit_chars`` characters, admitted for the stream's life."""
        ...

    async def send(self, msg: WindowRequest | SpeakerWindow | SpeechUnit, features: np.ndarray | None = None) -> None:
        """Send one item of an open stream: a window or speaker window (with its mel) or a speech unit."""
        ...

    async def probe_voice(self, model_path: str, config_path: str, timeout_s: float) -> VoiceProbed:
        """Have the engine load a voice and make it speak; its verdict."""
        ...
