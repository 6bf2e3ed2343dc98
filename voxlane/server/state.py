"""What the routes share: one object on ``app.state.voxlane``, built by the lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from voxlane.config import ServerConfig
from voxlane.engine.client import EngineHandle
from voxlane.models import Download, WhisperModel
from voxlane.server.catalog import ModelCatalog
from voxlane.server.executors import Executors
from voxlane.server.metrics import Metrics
from voxlane.voices import VoiceRegistry


@dataclass
class AppState:
    config: ServerConfig
    executors: Executors
    engine: EngineHandle
    metrics: Metrics
    started_at: int
    voices: VoiceRegistry | None = None
    realtime_sessions: int = 0
    """Live transcription WebSockets open now (bounded by --realtime-max-connections)."""
    catalog: ModelCatalog | None = None
    download: Download | None = None
    """What ``POST /v1/models/{id}`` downloads with: None is huggingface_hub (tests put a stand-in here)."""

    def __post_init__(self) -> None:
        if self.catalog is None:
            self.catalog = ModelCatalog(self.config)

    @property
    def models(self) -> ModelCatalog:
        assert self.catalog is not None
        return self.catalog

    async def whisper_model(self, requested: str) -> WhisperModel:
        """The Whisper model ``requested`` names, loaded in the engine (ModelNotFound, 404, when there is none
        on this machine; a 503 with Retry-After when it is still loading after --model-load-wait-s). The
        default model is always loaded: it costs no round trip to the engine."""
        model = await self.models.whisper(requested, self.executors)
        if model.path != self.models.default.path:
            await self.engine.load_model(model.path, self.config.model_load_wait_s)
        return model


def get_state(request: Request) -> AppState:
    return request.app.state.voxlane
