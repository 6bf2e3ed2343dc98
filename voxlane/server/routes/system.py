"""GET /health, /metrics, /v1/models; POST /v1/models/{id} (a pull); DELETE /v1/models/{id} (an unload), and
speaches' /api/ps routes (load, unload, list the loaded models)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from voxlane.errors import InvalidRequest, ModelInUse, ModelNotFound
from voxlane.models import ModelNotPresent, WhisperModel, check_pullable, progress_bars, pull, voice_repo_path
from voxlane.protocol import (
    Health,
    ModelCard,
    ModelKind,
    ModelList,
    ModelPullDone,
    ModelPullProgress,
    RunningModels,
    error_responses,
    sse_content,
)
from voxlane.server.drain import Drain
from voxlane.server.sse import event_stream
from voxlane.server.state import AppState, get_state

log = logging.getLogger(__name__)

router = APIRouter()

UNLOAD_TIMEOUT_S = 30.0
"""How long an unload waits for the engine's answer; the engine answers at once (an unload takes well under a
second), so only an engine that is stuck or dying runs this out (a 503)."""


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
    """Every id a client may send as ``model=``, with its ``kind`` and whether it is ``loaded``."""
    cards = await model_cards(get_state(request))
    return JSONResponse(ModelList(data=list(cards.values())).model_dump())


@router.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=error_responses(404))
async def get_model(model_id: str, request: Request) -> Response:
    state = get_state(request)
    cards = await model_cards(state)
    card = cards.get(model_id)
    if card is None:
        await _whisper_or_404(state, model_id, cards)  # a path, or a repo id in the cache, is a model too
        card = _card(state, model_id, "transcription", model_id)
    return JSONResponse(card.model_dump())


async def _whisper_or_404(state: AppState, model_id: str, cards: dict[str, ModelCard]) -> WhisperModel:
    try:
        return await state.models.whisper(model_id, state.executors)
    except ModelNotFound as exc:
        raise ModelNotFound(
            f"{exc.message.removesuffix(' (GET /v1/models lists the models this server has)')}; send one of: "
            f"{', '.join(cards)}. GET /v1/models lists them with their kind."
        ) from None


@router.delete("/v1/models/{model_id:path}", response_model=ModelCard, responses=error_responses(400, 404, 409, 503))
@router.delete("/api/ps/{model_id:path}", response_model=ModelCard, responses=error_responses(400, 404, 409, 503))
async def unload_model(model_id: str, request: Request) -> Response:
    """Unload a Whisper model from the engine now, to free its memory; answers its card, ``loaded: false``. A model
    not loaded is nothing to do (200). 409 for the default model (the first ``--model``), which stays loaded, and
    for a model with work in flight (its windows waiting, queued or running, or its load under way): retry once
    those requests have finished. The next request for the model loads it again. The files stay on disk (speaches'
    ``DELETE /v1/models/{id}`` deletes them; voxlane never does)."""
    state = get_state(request)
    cards = await model_cards(state)
    model = await _whisper_or_404(state, model_id, cards)
    if model.path == state.models.default.path:
        raise ModelInUse(
            f"'{model_id}' is the default model (the first --model), which stays loaded; unload another model, "
            "or start the server with another --model first"
        )
    await state.engine.unload_model(model.path, UNLOAD_TIMEOUT_S)
    card = cards.get(model_id) or _card(state, model_id, "transcription", model_id)
    return JSONResponse(card.model_copy(update={"loaded": False, "memory_bytes": None}).model_dump())


@router.post("/api/ps/{model_id:path}", response_model=ModelCard, responses=error_responses(404, 503))
async def load_model(model_id: str, request: Request) -> Response:
    """Load a Whisper model into the engine (speaches' route); answers its card once it is loaded. A model already
    loaded is nothing to do (200; speaches answers 409). 503 with Retry-After while it is still loading after
    ``--model-load-wait-s``."""
    state = get_state(request)
    cards = await model_cards(state)
    await _whisper_or_404(state, model_id, cards)
    await state.whisper_model(model_id)
    root = cards[model_id].root if model_id in cards else model_id
    card = _card(state, model_id, "transcription", root)  # the engine's stats came before its answer: memory too
    return JSONResponse(card.model_copy(update={"loaded": True}).model_dump())


@router.get("/api/ps", response_model=RunningModels)
async def running_models(request: Request) -> Response:
    """The Whisper models loaded now, by the names clients send (speaches' route)."""
    state = get_state(request)
    loaded = [path for path, m in state.engine.models.items() if m.loaded]
    if state.engine.healthy and state.models.default.path not in loaded:
        loaded.insert(0, state.models.default.path)
    return JSONResponse(RunningModels(models=[state.models.name_of(path) for path in loaded]).model_dump())


@router.post(
    "/v1/models/{model_id:path}",
    response_model=ModelCard,
    responses={
        **error_responses(400, 404),
        200: {"content": {"text/event-stream": sse_content(ModelPullProgress, ModelPullDone)}},
    },
)
async def pull_model(model_id: str, request: Request, stream: bool = False) -> Response:
    """Download a model into the Hugging Face cache: a CTranslate2 Whisper repo id (Systran/faster-whisper-small)
    or a Piper voice name (en_US-lessac-medium, from rhasspy/piper-voices). It answers once the files are there
    with the model's card; with ``?stream=true`` (or ``Accept: text/event-stream``) it streams server-sent
    events instead: ``model.pull.progress`` (bytes written and their total, at most 4 a second), then
    ``model.pull.done`` with the card, or an ``error`` event. A transcription never downloads anything itself.
    A client that hangs up does not stop the download."""
    state = get_state(request)
    if stream or "text/event-stream" in request.headers.get("accept", ""):
        try:  # a refusal that needs no download is a 400 before the stream starts
            check_pullable(model_id, state.config.hub)
        except ModelNotPresent as exc:
            raise InvalidRequest(str(exc), param="model", code="model_not_pullable") from None
        return event_stream(_pull_events(state, model_id), state.metrics, f"pull of {model_id}")
    await _pull(state, model_id, None)
    return JSONResponse(_pulled_card(state, model_id).model_dump())


async def _pull(state: AppState, model_id: str, tqdm_class: type | None) -> str:
    began = time.monotonic()
    try:
        path = await state.executors.run("files", pull, model_id, state.config.hub, tqdm_class, state.download)
    except ModelNotPresent as exc:
        raise InvalidRequest(str(exc), param="model", code="model_not_pullable") from None
    except Exception as exc:  # the hub's own errors (network, a repo that does not exist)
        raise InvalidRequest(f"pulling '{model_id}' failed: {exc}", param="model", code="pull_failed") from None
    log.info("pulled %s into %s in %.1f s", model_id, path, time.monotonic() - began)
    return path


def _pulled_card(state: AppState, model_id: str) -> ModelCard:
    kind: ModelKind = "speech" if voice_repo_path(model_id) is not None else "transcription"
    return _card(state, model_id, kind, model_id)


async def _pull_events(state: AppState, model_id: str) -> AsyncGenerator[dict[str, Any], None]:
    loop = asyncio.get_running_loop()
    progress: asyncio.Queue[tuple[int, int | None] | None] = asyncio.Queue()

    def report(done: int, total: int | None) -> None:  # on the files pool's thread (or a bar's __del__, later)
        if not loop.is_closed():
            loop.call_soon_threadsafe(progress.put_nowait, (done, total))

    task = asyncio.ensure_future(_pull(state, model_id, progress_bars(report)))
    task.add_done_callback(lambda _task: progress.put_nowait(None))
    while (item := await progress.get()) is not None:
        yield ModelPullProgress(id=model_id, downloaded_bytes=item[0], total_bytes=item[1]).model_dump()
    path = await task  # its InvalidRequest ends the stream with an error event
    yield ModelPullDone(id=model_id, path=path, model=_pulled_card(state, model_id)).model_dump()


def _card(state: AppState, model_id: str, kind: ModelKind, root: str) -> ModelCard:
    loaded: bool = kind == "speech"
    memory = None
    path = state.models.path_of(root)
    if kind == "transcription" and path is not None:
        engine_state = state.engine.models.get(path)
        loaded = engine_state is not None and engine_state.loaded
        if path == state.models.default.path:  # preloaded, never unloaded (stats come once a second)
            loaded = state.engine.healthy
        memory = engine_state.memory_bytes if engine_state is not None and loaded else None
    return ModelCard(id=model_id, created=state.started_at, kind=kind, root=root, loaded=loaded, memory_bytes=memory)


async def model_cards(state: AppState) -> dict[str, ModelCard]:
    """Every id a client may send as ``model=``, by id: the Whisper models (those served, then the installed ones
    and those in the Hugging Face cache), their aliases (``whisper-1``), then the speech model and its aliases
    (``tts-1``). Voices are listed by /v1/audio/voices."""
    listing = await state.executors.run("files", state.models.listing)
    cards: dict[str, ModelCard] = {}
    for model_id, kind, root in listing:  # a model directory named like an alias keeps its own card
        cards.setdefault(model_id, _card(state, model_id, kind, root))
    return cards
