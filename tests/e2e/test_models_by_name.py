"""Models by name, end to end on one server with no network: the bundled tiny.en (default) and the
multilingual base (the dev extra installs it), a Hugging Face cache laid out on disk from the bundled files
(Whisper tiny.en as Systran/faster-whisper-tiny.en, the Piper voice as rhasspy/piper-voices' en_US-joe-medium),
HF_HUB_OFFLINE=1, a 4 s TTL and --model-load-wait-s 0 (a request for a model not loaded gets its 503 at once)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.conftest import Clip, ServerProcess, metric, running_server
from tests.e2e.test_realtime import events_until, ws_url
from tests.unit.test_models import hf_repo, tiny_en_repo
from voxlane.config import default_voice_paths

TTL_S = 4.0


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("hf")
    tiny_en_repo(home / "hub")
    onnx, config = (Path(p) for p in default_voice_paths())
    prefix = "en/en_US/joe/medium/en_US-joe-medium"
    hf_repo(home / "hub", "rhasspy/piper-voices", {f"{prefix}.onnx": onnx, f"{prefix}.onnx.json": config})
    return home


@pytest.fixture(scope="module")
def models_server(hf_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("data")
    with running_server(
        "--model", "whisper-tiny.en", "--model", "whisper-base", "--model-ttl-s", str(TTL_S),
        "--model-load-wait-s", "0", "--data-dir", str(data_dir), "--model-alias", "whisper-large=whisper-base",
        env={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"},
    ) as srv:  # fmt: skip
        yield srv


def clip(dev_set: list[Clip], name: str = "cmu_goforward.wav") -> Clip:
    return next(c for c in dev_set if c.path.name == name)


def post(server: ServerProcess, route: str, clip: Clip, **data: str) -> httpx.Response:
    """POST the clip; a 503 that says the model is loading is sent again once GET /v1/models says it loaded."""
    for _ in range(3):
        r = httpx.post(server.base_url + route, files={"file": clip.path.open("rb")}, data=data, timeout=120)
        if r.status_code != 503:
            return r
        assert r.json()["error"]["code"] == "model_loading", r.text
        assert int(r.headers["Retry-After"]) >= 1
        wait_loaded(server, data["model"])
    raise AssertionError("the model loaded, and unloaded again before each request")


def loaded(server: ServerProcess) -> dict[str, bool]:
    models = httpx.get(server.base_url + "/v1/models", timeout=10).json()["data"]
    return {m["id"]: m["loaded"] for m in models}


def wait_loaded(server: ServerProcess, model: str, timeout_s: float = 120.0) -> None:
    """Until GET /v1/models says ``model`` is loaded (its load was asked for already)."""
    deadline = time.monotonic() + timeout_s
    while not loaded(server).get(model):
        assert time.monotonic() < deadline, f"{model} did not load in {timeout_s:.0f} s"
        time.sleep(0.1)  # polls the model list


def test_a_repo_id_in_the_hugging_face_cache_is_served(models_server: ServerProcess, dev_set: list[Clip]) -> None:
    r = post(models_server, "/v1/audio/transcriptions", clip(dev_set), model="Systran/faster-whisper-tiny.en")
    assert r.status_code == 200, r.text
    assert "forward" in r.json()["text"].lower()
    assert "Systran/faster-whisper-tiny.en" in loaded(models_server)  # found in the cache, listed


def test_each_model_keeps_its_own_behaviour_in_one_server(models_server: ServerProcess, dev_set: list[Clip]) -> None:
    english = clip(dev_set, "vctk_p225_020.opus")
    refused = post(models_server, "/v1/audio/translations", english, model="whisper-tiny.en")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "translation_unsupported"
    translated = post(models_server, "/v1/audio/translations", english, model="whisper-large")  # an alias of base
    assert translated.status_code == 200, translated.text
    detected = post(
        models_server, "/v1/audio/transcriptions", english, model="whisper-base", response_format="verbose_json"
    )
    assert detected.json()["language"] == "english"  # detected: only a multilingual model does
    german = post(models_server, "/v1/audio/transcriptions", english, model="whisper-base", language="de")
    assert german.status_code == 200
    assert post(models_server, "/v1/audio/transcriptions", english, model="whisper-1", language="de").status_code == 400


def test_an_idle_model_unloads_after_its_ttl_and_the_next_request_loads_it_again(
    models_server: ServerProcess, dev_set: list[Clip]
) -> None:
    url = models_server.base_url
    first = httpx.post(url + "/v1/audio/transcriptions", files={"file": clip(dev_set).path.open("rb")},
                       data={"model": "whisper-base"}, timeout=120)  # fmt: skip
    if first.status_code == 503:  # not loaded (its TTL ran out since the last test): 503 at once, Retry-After
        assert int(first.headers["Retry-After"]) >= 1
        first = post(models_server, "/v1/audio/transcriptions", clip(dev_set), model="whisper-base")
    assert first.status_code == 200
    page = httpx.get(url + "/metrics").text
    rss_loaded = metric(page, "voxlane_engine_process_resident_memory_bytes")
    loads = metric(page, "voxlane_engine_model_loads_total", model="whisper-base")
    took = metric(page, "voxlane_engine_model_memory_bytes", model="whisper-base")
    assert took > 50e6
    deadline = time.monotonic() + TTL_S + 10
    while loaded(models_server)["whisper-base"]:
        assert time.monotonic() < deadline, "whisper-base stayed loaded past its TTL"
        time.sleep(0.5)
    assert loaded(models_server)["whisper-tiny.en"]  # the default model stays
    time.sleep(1.5)  # the engine's stats come once a second
    page = httpx.get(url + "/metrics").text
    freed = rss_loaded - metric(page, "voxlane_engine_process_resident_memory_bytes")
    print(f"engine resident memory freed by the unload: {freed / 1e6:.0f} MB of the {took / 1e6:.0f} MB it took")
    assert freed >= 0.6 * took  # whisper-base's replicas, handed back to the system
    assert metric(page, "voxlane_engine_model_unloads_total", model="whisper-base") >= 1
    again = httpx.post(url + "/v1/audio/transcriptions", files={"file": clip(dev_set).path.open("rb")},
                       data={"model": "whisper-base"}, timeout=120)  # fmt: skip
    assert again.status_code == 503 and again.json()["error"]["code"] == "model_loading"  # --model-load-wait-s 0
    assert post(models_server, "/v1/audio/transcriptions", clip(dev_set), model="whisper-base").status_code == 200
    time.sleep(1.5)
    page = httpx.get(url + "/metrics").text
    assert metric(page, "voxlane_engine_model_loads_total", model="whisper-base") == loads + 1


def test_twenty_loads_and_unloads_leave_the_engine_as_large_as_it_was(
    hf_home: Path, tmp_path: Path, dev_set: list[Clip]
) -> None:
    """Two more names of tiny.en and room for one besides the default: each request loads its model and
    unloads the other one. A model that stays alive after its unload grows the engine by its size each time,
    twenty times that in all; the bound is one model's size, because the engine's resident memory can step
    by tens of MB under a full suite's load without growing from cycle to cycle."""
    tiny_en_repo(hf_home / "hub", "Systran/faster-whisper-tiny.en-copy")
    names = ["Systran/faster-whisper-tiny.en", "Systran/faster-whisper-tiny.en-copy"]
    with running_server(
        "--max-loaded-models", "2", "--model-ttl-s", "0", "--data-dir", str(tmp_path),
        env={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"},
    ) as srv:  # fmt: skip

        def rss_after(k: int) -> float:
            """The engine's resident memory once its stats show the k-th request's load."""
            deadline = time.monotonic() + 10
            while True:  # the engine's stats come once a second
                page = httpx.get(srv.base_url + "/metrics").text
                with contextlib.suppress(KeyError):  # not on the page before the engine's first stats of it
                    if metric(page, "voxlane_engine_model_loads_total", model=names[k % 2]) == k // 2 + 1:
                        size[k] = metric(page, "voxlane_engine_model_memory_bytes", model=names[k % 2])
                        return metric(page, "voxlane_engine_process_resident_memory_bytes")
                assert time.monotonic() < deadline, "the engine's stats did not show the load"
                time.sleep(0.2)  # polls the stats

        rss, size = {}, {}
        for k in range(24):  # each request loads its model, unloading the other one
            assert post(srv, "/v1/audio/transcriptions", clip(dev_set), model=names[k % 2]).status_code == 200
            if k in (3, 23):  # the first loads grow the heap to its working size
                rss[k] = rss_after(k)
        unloads = sum(metric(httpx.get(srv.base_url + "/metrics").text, "voxlane_engine_model_unloads_total",
                             model=name) for name in names)  # fmt: skip
    grown = rss[23] - rss[3]
    print(f"engine resident memory over 20 loads and unloads: {rss[3] / 1e6:.0f} -> {rss[23] / 1e6:.0f} MB"
          f" (one model: {size[23] / 1e6:.0f} MB)")  # fmt: skip
    assert unloads >= 20
    assert size[23] > 0
    assert grown <= size[23]


def test_openai_names_work_through_the_openai_client(models_server: ServerProcess, dev_set: list[Clip]) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=models_server.base_url + "/v1", api_key="none", max_retries=0)
    for name in ("gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-transcribe", "whisper-1"):
        text = client.audio.transcriptions.create(model=name, file=clip(dev_set).path.open("rb")).text
        assert "forward" in text.lower(), name
        assert client.models.retrieve(name).root == "whisper-tiny.en"  # type: ignore[attr-defined]
    audio = client.audio.speech.create(model="gpt-4o-mini-tts", voice="en_US-joe-medium", input="Hi.",
                                       response_format="wav")  # fmt: skip
    assert audio.content[:4] == b"RIFF"  # a Piper voice by name, from the cache's rhasspy/piper-voices


def test_an_absent_model_is_a_404_that_says_how_to_pull_it(models_server: ServerProcess, dev_set: list[Clip]) -> None:
    r = post(models_server, "/v1/audio/transcriptions", clip(dev_set), model="Systran/faster-whisper-small")
    assert r.status_code == 404
    assert "voxlane models pull Systran/faster-whisper-small" in r.json()["error"]["message"]


def test_pulls_are_refused_clearly_offline(models_server: ServerProcess, hf_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "voxlane.cli", "models", "pull", "Systran/faster-whisper-small"],
        env={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "HF_HUB_OFFLINE is set, so no download is allowed" in done.stderr
    r = httpx.post(models_server.base_url + "/v1/models/Systran/faster-whisper-small", timeout=30)
    assert r.status_code == 400 and "HF_HUB_OFFLINE" in r.json()["error"]["message"]


def test_the_realtime_endpoint_takes_another_language_with_a_multilingual_model(models_server: ServerProcess) -> None:
    async def update(model: str, language: str) -> dict[str, Any]:
        async with websockets.connect(ws_url(models_server)) as ws:
            await events_until(ws, "session.created")
            transcription = {"model": model, "language": language}
            session = {"type": "transcription", "audio": {"input": {"transcription": transcription}}}
            await ws.send(json.dumps({"type": "session.update", "session": session}))
            while True:
                event = json.loads(await ws.recv())
                if event["type"] in ("session.updated", "error"):
                    return event

    for _ in range(3):  # whisper-base may need loading first: its 503 comes as an error event
        event = asyncio.run(update("whisper-base", "de"))
        if event["type"] == "session.updated" or event["error"].get("code") != "model_loading":
            break
        wait_loaded(models_server, "whisper-base")
    assert event["type"] == "session.updated", event
    assert event["session"]["audio"]["input"]["transcription"]["language"] == "de"
    refused = asyncio.run(update("whisper-1", "de"))
    assert refused["type"] == "error" and "English-only" in refused["error"]["message"]
