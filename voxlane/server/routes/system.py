"""GET /health, /metrics, /v1/models."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from voxlane.protocol import ModelCard, ModelList
from voxlane.server.drain import Drain
from voxlane.server.state import get_state

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> Response:
    """200 ``{"status": "ok", "engine_restarts": N}`` while serving; otherwise 503 with the status
    (``starting``, ``restarting``, ``failed``, ``draining``), the reason, and ``Retry-After`` where known."""
    engine = get_state(request).engine
    drain: Drain = request.app.state.drain
    if drain.draining:
        error = drain.refusal()
        status = "draining"
    elif engine.healthy:
        return JSONResponse({"status": "ok", "engine_restarts": engine.restarts})
    else:
        error = engine.unavailable()
        status = engine.state if engine.state != "ready" else "restarting"  # dead, not yet noticed
    body = {"status": status, "engine_restarts": engine.restarts, "reason": error.message}
    return JSONResponse(body, status_code=503, headers=error.headers())


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state = get_state(request)
    return PlainTextResponse(
        state.metrics.render(state.engine.queued_windows, state.engine.healthy), media_type="text/plain; version=0.0.4"
    )


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    state = get_state(request)
    cards = [ModelCard(id=state.config.model_name, created=state.started_at)]
    return JSONResponse(ModelList(data=cards).model_dump())


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, request: Request) -> Response:
    state = get_state(request)
    return JSONResponse(ModelCard(id=state.resolve_model(model_id), created=state.started_at).model_dump())
