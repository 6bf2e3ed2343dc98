"""GET /health, /metrics, /v1/models."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from voxlane.errors import EngineUnavailable
from voxlane.protocol import Health, ModelCard, ModelList, error_responses
from voxlane.server.state import get_state

router = APIRouter()


@router.get("/health", response_model=Health, responses=error_responses(503))
async def health(request: Request) -> Response:
    engine = get_state(request).engine
    if engine.healthy:
        return JSONResponse({"status": "ok"})
    error = EngineUnavailable(f"the engine is not serving ({engine.failure or 'starting'})")
    return JSONResponse(error.to_json(), status_code=503)


@router.get("/metrics", response_class=PlainTextResponse, response_description="Prometheus text format.")
async def metrics(request: Request) -> Response:
    state = get_state(request)
    return PlainTextResponse(
        state.metrics.render(state.engine.queued_windows, state.engine.healthy), media_type="text/plain; version=0.0.4"
    )


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> Response:
    state = get_state(request)
    cards = [ModelCard(id=state.config.model_name, created=state.started_at)]
    return JSONResponse(ModelList(data=cards).model_dump())


@router.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=error_responses(404))
async def get_model(model_id: str, request: Request) -> Response:
    state = get_state(request)
    return JSONResponse(ModelCard(id=state.resolve_model(model_id), created=state.started_at).model_dump())
