"""GET /v1/realtime (WebSocket): live transcription, OpenAI Realtime-compatible; GET /demo, its browser page (the
playground at / has it too, in its Live tab).

The socket is accepted for any ``?intent=transcription`` or ``?model=`` query (the openai SDK sends one of
them): the session is a transcription session either way (server/realtime/session.py). A browser cannot
set an Authorization header on a WebSocket, so OpenAI's browser form of the key, the subprotocol
``openai-insecure-api-key.KEY`` next to ``realtime``, is read by the key check (server/auth.py), and
``realtime`` is echoed back. Past ``--realtime-max-connections`` a socket is accepted, told why in an
``error`` event, and closed (1013, try again later).
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, WebSocket
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

from voxlane.errors import QueueFull
from voxlane.server.realtime.events import error_event
from voxlane.server.realtime.session import RealtimeSession
from voxlane.server.state import AppState

router = APIRouter()

_STATIC = resources.files("voxlane.server") / "static"
_PAGES = {name: (_STATIC / name).read_bytes() for name in ("demo.html", "demo.js", "pcm-worklet.js")}
"""Read once at import: a few kilobytes, served from memory."""


@router.websocket("/v1/realtime")
async def realtime(ws: WebSocket) -> None:
    state: AppState = ws.app.state.voxlane
    offered = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    await ws.accept(subprotocol="realtime" if "realtime" in offered else None)
    metrics = state.metrics
    if state.realtime_sessions >= state.config.realtime_max_connections:
        refusal = QueueFull(
            f"this server has {state.config.realtime_max_connections} live sessions open "
            "(--realtime-max-connections); retry later",
            retry_after_s=5,
            code="too_many_sessions",
        )
        metrics.realtime_errors.labels(refusal.code).inc()
        await ws.send_json(error_event(refusal))
        await ws.close(1013)
        return
    state.realtime_sessions += 1
    metrics.realtime_sessions.inc()
    try:
        await RealtimeSession(ws, state).run()
    finally:
        state.realtime_sessions -= 1
        metrics.realtime_sessions.dec()


@router.get("/demo", include_in_schema=False)
async def demo() -> HTMLResponse:
    return HTMLResponse(_PAGES["demo.html"])


@router.get("/demo/{name}", include_in_schema=False)
async def demo_script(name: str) -> Response:
    if name not in ("demo.js", "pcm-worklet.js"):
        raise HTTPException(status_code=404)  # answered in OpenAI's error JSON by the app's handler
    return Response(_PAGES[name], media_type="text/javascript")
