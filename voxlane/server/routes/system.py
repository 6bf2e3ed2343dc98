"""GET /health, /metrics, /v1/models."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from voxlane.errors import EngineUnavailable
from voxlane.protocol import ModelCard, ModelList
from voxlane.server.state import get_state

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> Response:
    engine = get_state(request).engine
    if engine.healthy:
        return JSONResponse({"status": "ok"})
    error = EngineUnavailable(f"the engine is not serving ({engine.failure or 'starting'})")
    return JSONResponse(error.to_json(), status_code=503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state = get_state(request)
    body, content_type = await state.executors.run("metrics", state.metrics.render, request.headers.get("accept", ""))
    return Response(body, media_type=content_type)


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    state = get_state(request)
    cards = [ModelCard(id=state.config.model_name, created=state.started_at)]
    return JSONResponse(ModelList(data=cards).model_dump())


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, request: Request) -> Response:
    state = get_state(request)
    return JSONResponse(ModelCard(id=state.resolve_model(model_id), created=state.started_at).model_dump())
