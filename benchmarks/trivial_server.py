"""A trivial OpenAI audio server for measuring the load generator itself: canned answers, no model.

    python benchmarks/trivial_server.py --port 8100

POST /v1/audio/transcriptions reads the whole multipart upload (as any real server must) and answers
{"text": ...}; POST /v1/audio/speech answers 1 s of silent 16-bit pcm at 22050 Hz; GET /health answers ok.
It binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CANNED_TEXT = "this is all very whispered"
CANNED_PCM = bytes(2 * 22050)


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def transcriptions(request: Request) -> Response:
    form = await request.form()
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        return JSONResponse({"error": {"message": "missing 'file'", "type": "invalid_request_error"}}, 400)
    await upload.read()
    return JSONResponse({"text": CANNED_TEXT})


async def speech(request: Request) -> Response:
    await request.json()
    return Response(CANNED_PCM, media_type="audio/pcm")


app = Starlette(
    routes=[
        Route("/health", health),
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/speech", speech, methods=["POST"]),
    ]
)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8100)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
