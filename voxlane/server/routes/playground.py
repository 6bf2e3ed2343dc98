"""GET /, the playground page: transcribe, speak, live transcription, the server's models and figures.

Plain HTML, CSS and JavaScript modules from ``static/``, no build step and nothing fetched from elsewhere;
every request the page makes goes to the routes a client would use, so it needs no route of its own.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

router = APIRouter()

_STATIC = resources.files("voxlane.server") / "static"
_TYPES = {".js": "text/javascript", ".css": "text/css"}
_FILES = {
    name: (_STATIC / name).read_bytes()
    for name in (
        "playground.css",
        "common.js",
        "transcribe.js",
        "speak.js",
        "live.js",
        "server.js",
        "playground.js",
        "pcm-worklet.js",
    )
}
"""Read once at import: some tens of kilobytes, served from memory."""
_INDEX = (_STATIC / "index.html").read_bytes()


@router.get("/", include_in_schema=False)
async def index() -> HTMLResponse:
    return HTMLResponse(_INDEX)


@router.get("/playground/{name}", include_in_schema=False)
async def playground_file(name: str) -> Response:
    body = _FILES.get(name)
    if body is None:
        raise HTTPException(status_code=404)  # answered in OpenAI's error JSON by the app's handler
    return Response(body, media_type=_TYPES[name[name.rfind(".") :]], headers={"Cache-Control": "no-cache"})
