"""GET /health, /metrics, /v1/models."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from voxlane.config import MODEL_ALIASES
from voxlane.errors import ModelNotFound
from voxlane.protocol import Health, ModelCard, ModelKind, ModelList, error_responses
from voxlane.server.drain import Drain
from voxlane.server.state import AppState, get_state
from voxlane.voices import SPEECH_MODEL, SPEECH_MODEL_ALIASES

router = APIRouter()


@router.get(
    "/health",
    response_model=Health,
    responses={
        503: {
            "model": Health,
            "description": "Not serving: the engine is starting, restarting or failed, or the server is draining.",
        }
    },
)
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


@router.get("/metrics", response_class=PlainTextResponse, response_description="Prometheus text format.")
async def metrics(request: Request) -> Response:
    state = get_state(request)
    body, content_type = await state.executors.run("metrics", state.metrics.render, request.headers.get("accept", ""))
    return Response(body, media_type=content_type)


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> Response:
    return JSONResponse(ModelList(data=list(model_cards(get_state(request)).values())).model_dump())


@router.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=error_responses(404))
async def get_model(model_id: str, request: Request) -> Response:
    cards = model_cards(get_state(request))
    card = cards.get(model_id)
    if card is None:
        raise ModelNotFound(
            f"the model '{model_id}' does not exist on this server; send one of: {', '.join(cards)}. "
            "GET /v1/models lists them with their kind."
        )
    return JSONResponse(card.model_dump())


def model_cards(state: AppState) -> dict[str, ModelCard]:
    """Every id a client may send as ``model=``, by id: the Whisper model and its aliases (``whisper-1``),
    then the speech model and its aliases (``tts-1``, ``tts-1-hd``). Voices are listed by /v1/audio/voices."""
    whisper = state.config.model_name
    names: list[tuple[str, ModelKind, str]] = [
        (whisper, "transcription", whisper),
        *((alias, "transcription", whisper) for alias in MODEL_ALIASES),
        (SPEECH_MODEL, "speech", SPEECH_MODEL),
        *((alias, "speech", SPEECH_MODEL) for alias in SPEECH_MODEL_ALIASES),
    ]
    cards: dict[str, ModelCard] = {}
    for model_id, kind, root in names:  # a model directory named like an alias keeps its own card
        cards.setdefault(model_id, ModelCard(id=model_id, created=state.started_at, kind=kind, root=root))
    return cards
