"""A small fake OpenAI audio server (Starlette on uvicorn, 127.0.0.1, a thread of the test process) whose
behaviour each test picks: correct answers, 500s, slow answers, speech paced faster or slower than real
time. ``voxlane bench`` runs in-process through ``voxlane.cli.main``."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from voxlane.audio.encode import wav_header
from voxlane.bench.server import free_port

FAKE_TEXT = "this is all very whispered"
PCM_RATE = 22050


@dataclass
class Behaviour:
    status: int = 200
    """Status of the audio endpoints (health always answers 200)."""
    delay_s: float = 0.0
    """Wait before answering the audio endpoints."""
    speech_audio_s: float = 1.0
    speech_chunk_s: float = 0.1
    speech_speed: float = 4.0
    """Audio seconds produced per wall second (0.5 = half real time)."""
    requests: int = 0


class FakeServer:
    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        app = Starlette(
            routes=[
                Route("/health", self._health),
                Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"]),
                Route("/v1/audio/speech", self._speech, methods=["POST"]),
            ]
        )
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def _fail_or_wait(self) -> Response | None:
        b = self.behaviour
        b.requests += 1
        if b.delay_s:
            await asyncio.sleep(b.delay_s)
        if b.status != 200:
            return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, status_code=b.status)
        return None

    async def _transcribe(self, request: Request) -> Response:
        form = await request.form()
        assert form.get("file") is not None and form.get("model")
        if (failed := await self._fail_or_wait()) is not None:
            return failed
        if form.get("stream") == "true":

            async def events() -> AsyncIterator[str]:
                for word in FAKE_TEXT.split():
                    yield "data: " + json.dumps({"type": "transcript.text.delta", "delta": " " + word}) + "\n\n"
                    await asyncio.sleep(0.01)
                yield "data: " + json.dumps({"type": "transcript.text.done", "text": FAKE_TEXT}) + "\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse({"text": FAKE_TEXT})

    async def _speech(self, request: Request) -> Response:
        body = await request.json()
        assert body["input"] and body["model"]
        if (failed := await self._fail_or_wait()) is not None:
            return failed
        b = self.behaviour
        n_chunks = round(b.speech_audio_s / b.speech_chunk_s)
        chunk = b"\x00\x01" * round(PCM_RATE * b.speech_chunk_s)

        if body.get("response_format") == "flac":  # compressed: one body, no chunk timing
            buf = io.BytesIO()
            soundfile.write(buf, np.zeros(round(PCM_RATE * b.speech_audio_s), dtype=np.int16), PCM_RATE, format="FLAC")
            return Response(buf.getvalue(), media_type="audio/flac")
        wav = body.get("response_format") == "wav"
        sse = body.get("stream_format") == "sse"

        async def audio() -> AsyncIterator[bytes]:
            start = time.perf_counter()
            for k in range(n_chunks):
                wait = start + k * b.speech_chunk_s / b.speech_speed - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                data = (wav_header(PCM_RATE) if wav and k == 0 else b"") + chunk
                if sse:
                    event = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
                    yield f"data: {json.dumps(event)}\n\n".encode()
                else:
                    yield data
            if sse:
                yield b'data: {"type": "speech.audio.done"}\n\n'

        return StreamingResponse(audio(), media_type="text/event-stream" if sse else "audio/pcm")


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeServer]:
    srv = FakeServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def fake(fake_server: FakeServer) -> FakeServer:
    fake_server.behaviour = Behaviour()
    return fake_server


@pytest.fixture
def tiny_dataset(tmp_path: Path, dev_set: Any) -> Path:
    """A manifest of two short dev utterances (real audio, real references)."""
    short = sorted((c for c in dev_set if c.duration_s < 30), key=lambda c: c.duration_s)[:2]
    lines = [json.dumps({"audio": str(c.path), "text": c.text, "duration_s": c.duration_s}) for c in short]
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def dev_manifest(dev_set: Any) -> Path:
    """The dev set's manifest.jsonl (its audio paths are relative to it: audio/NAME.wav)."""
    return dev_set[0].path.parents[1] / "manifest.jsonl"


@pytest.fixture
def down_url() -> str:
    """A loopback URL with nothing listening."""
    return f"http://127.0.0.1:{free_port()}"
