"""What the routes share: one object on ``app.state.voxlane``, built by the lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from voxlane.config import MODEL_ALIASES, ServerConfig
from voxlane.engine.client import EngineClient
from voxlane.errors import ModelNotFound
from voxlane.server.executors import Executors
from voxlane.server.metrics import Metrics
from voxlane.voices import VoiceRegistry


@dataclass
class AppState:
    config: ServerConfig
    executors: Executors
    engine: EngineClient
    metrics: Metrics
    started_at: int
    voices: VoiceRegistry | None = None
    realtime_sessions: int = 0
    """Live transcription WebSockets open now (bounded by --realtime-max-connections)."""

    def resolve_model(self, requested: str) -> str:
        """The served model's id for ``requested``, or ModelNotFound."""
        names = {self.config.model_name, self.config.model, *MODEL_ALIASES}
        if requested in names:
            return self.config.model_name
        raise ModelNotFound(
            f"the model '{requested}' does not exist on this server; send model='{self.config.model_name}' "
            f"(or one of its aliases: {', '.join(MODEL_ALIASES)}). GET /v1/models lists the models."
        )


def get_state(request: Request) -> AppState:
    return request.app.state.voxlane
