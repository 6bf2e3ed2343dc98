"""POST /v1/models/{id} with its progress streamed (``?stream=true`` or ``Accept: text/event-stream``), on the
route alone, with a stand-in for huggingface_hub's ``snapshot_download`` (no network): it lays the repo out
in the cache and reports the bytes it writes on tqdm bars the way huggingface_hub does (one bar of bytes
whose total grows as files start, one bar of files)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from tqdm import tqdm

from tests.unit.test_models import tiny_en_repo
from voxlane.errors import VoxlaneError
from voxlane.models import HubCache
from voxlane.server.metrics import Metrics
from voxlane.server.routes.system import router

REPO = "Systran/faster-whisper-tiny.en"
FILE_BYTES = [300_000, 200_000]
CHUNKS = 3


def fake_download(chunk_pause_s: float = 0.3, fail: bool = False) -> Callable[..., str]:
    def download(repo_id: str, *, cache_dir: str, tqdm_class: Any = None, **_options: Any) -> str:
        bars: Any = tqdm_class or partial(tqdm, disable=True)  # None: huggingface_hub's own bars, on stderr
        files = bars(total=len(FILE_BYTES), desc=f"Fetching {len(FILE_BYTES)} files", unit="it")
        written = bars(total=0, unit="B", unit_scale=True, desc="Reconstructing")
        transfer = bars(total=0, unit="B", desc="Downloading bytes")  # Xet's network bytes: not reported
        for size in FILE_BYTES:
            written.total += size
            for _ in range(CHUNKS):
                time.sleep(chunk_pause_s)
                if fail:
                    raise OSError("connection reset by peer")
                written.update(size // CHUNKS)
                transfer.update(size // CHUNKS // 2)
            files.update(1)
        for bar in (files, written, transfer):
            bar.close()
        return str(tiny_en_repo(Path(cache_dir), repo_id))

    return download


async def openai_error(_request: Request, exc: VoxlaneError) -> JSONResponse:
    return JSONResponse(exc.to_json(), status_code=exc.status_code)  # as the app's one handler does


class FilesPool:
    async def run(self, _pool: str, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)


def client(tmp_path: Path, download: Callable[..., str], offline: bool = False) -> TestClient:
    app = FastAPI()
    app.include_router(router)
    app.add_exception_handler(VoxlaneError, openai_error)  # type: ignore[arg-type]
    app.state.voxlane = SimpleNamespace(
        config=SimpleNamespace(hub=HubCache(tmp_path, offline=offline)),
        executors=FilesPool(),
        metrics=Metrics(),
        download=download,
        models=SimpleNamespace(path_of=lambda _name: None),
        started_at=0,
    )
    return TestClient(app)


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("data: ")) for line in text.splitlines() if line.startswith("data: ")]


def test_a_streamed_pull_reports_the_bytes_written_as_they_grow_then_the_model(tmp_path: Path) -> None:
    with client(tmp_path, fake_download()).stream("POST", f"/v1/models/{REPO}?stream=true") as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        got = events(r.read().decode())
    progress, done = got[:-1], got[-1]
    assert len(progress) >= 3, got  # as it goes, not only at the end
    done_bytes = [e["downloaded_bytes"] for e in progress]
    assert done_bytes == sorted(done_bytes) and done_bytes[0] < sum(FILE_BYTES) // 2
    last = progress[-1]
    assert (last["downloaded_bytes"], last["total_bytes"]) == (sum(FILE_BYTES) // CHUNKS * CHUNKS, sum(FILE_BYTES))
    assert {e["type"] for e in progress} == {"model.pull.progress"}
    assert done["type"] == "model.pull.done"
    assert done["model"]["id"] == REPO and done["model"]["kind"] == "transcription"
    assert (Path(done["path"]) / "model.bin").is_file()


def test_accept_event_stream_asks_for_the_stream_too(tmp_path: Path) -> None:
    r = client(tmp_path, fake_download(0.0)).post(f"/v1/models/{REPO}", headers={"Accept": "text/event-stream"})
    assert events(r.text)[-1]["type"] == "model.pull.done"


def test_without_stream_the_card_comes_once_the_files_are_there(tmp_path: Path) -> None:
    r = client(tmp_path, fake_download(0.0)).post(f"/v1/models/{REPO}")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json()["id"] == REPO
    assert HubCache(tmp_path).snapshot(REPO) is not None


def test_a_pull_that_fails_midway_ends_the_stream_with_an_error_event(tmp_path: Path) -> None:
    r = client(tmp_path, fake_download(0.0, fail=True)).post(f"/v1/models/{REPO}?stream=true")
    last = events(r.text)[-1]
    assert last["type"] == "error"
    assert last["error"]["code"] == "pull_failed" and "connection reset" in last["error"]["message"]


def test_a_streamed_pull_refused_offline_is_a_400_before_any_event(tmp_path: Path) -> None:
    r = client(tmp_path, fake_download(0.0), offline=True).post(f"/v1/models/{REPO}?stream=true")
    assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_pullable"
    assert "HF_HUB_OFFLINE" in r.json()["error"]["message"]
