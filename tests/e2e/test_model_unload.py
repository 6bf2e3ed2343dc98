"""Unloading a Whisper model on request, end to end: a server with the bundled tiny.en (the default) and the
installed multilingual base, no TTL in reach (--model-ttl-s 600), so that only the requests here unload base.
DELETE /v1/models/{id} (and speaches' DELETE /api/ps/{id}) unloads a loaded model now and frees its memory;
the default model is refused with a 409, an unknown one is a 404, one not loaded is nothing to do; the next
request for an unloaded model loads it again."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.conftest import Clip, ServerProcess, metric, running_server

BASE = "whisper-base"
DEFAULT = "whisper-tiny.en"


@pytest.fixture(scope="module")
def unload_server() -> Iterator[ServerProcess]:
    with running_server("--model", DEFAULT, "--model", BASE, "--model-ttl-s", "600") as srv:
        yield srv


def load(server: ServerProcess, model: str, timeout_s: float = 120.0) -> None:
    """POST /api/ps/{model} until it answers 200 (a 503 says the load goes on: Retry-After)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = httpx.post(f"{server.base_url}/api/ps/{model}", timeout=timeout_s)
        if r.status_code == 200:
            assert r.json()["loaded"] is True and r.json()["memory_bytes"] > 0
            return
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_loading", r.text
        assert time.monotonic() < deadline, f"{model} did not load in {timeout_s:.0f} s"
        time.sleep(float(r.headers["Retry-After"]))


def loaded(server: ServerProcess) -> dict[str, bool]:
    models = httpx.get(server.base_url + "/v1/models", timeout=10).json()["data"]
    return {m["id"]: m["loaded"] for m in models}


def unload(server: ServerProcess, model: str, route: str = "/v1/models") -> httpx.Response:
    return httpx.delete(f"{server.base_url}{route}/{model}", timeout=60)


def test_a_loaded_model_unloads_on_request_and_frees_its_memory(unload_server: ServerProcess) -> None:
    load(unload_server, BASE)
    assert loaded(unload_server)[BASE]
    assert httpx.get(unload_server.base_url + "/api/ps").json() == {"models": [DEFAULT, BASE]}
    time.sleep(1.5)  # the engine's stats come once a second: the memory the load took is on them by then
    page = httpx.get(unload_server.base_url + "/metrics").text
    took = metric(page, "voxlane_engine_model_memory_bytes", model=BASE)
    rss_loaded = metric(page, "voxlane_engine_process_resident_memory_bytes")
    unloads = metric(page, "voxlane_engine_model_unloads_total", model=BASE)
    r = unload(unload_server, BASE)
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["loaded"], r.json()["memory_bytes"]) == (BASE, False, None)
    # At once, with no wait: the engine sends its stats before its answer.
    assert loaded(unload_server)[BASE] is False and loaded(unload_server)[DEFAULT] is True
    assert httpx.get(unload_server.base_url + "/api/ps").json() == {"models": [DEFAULT]}
    page = httpx.get(unload_server.base_url + "/metrics").text
    assert metric(page, "voxlane_engine_model_unloads_total", model=BASE) == unloads + 1
    freed = rss_loaded - metric(page, "voxlane_engine_process_resident_memory_bytes")
    print(f"engine resident memory freed by DELETE /v1/models/{BASE}: {freed / 1e6:.0f} MB of the {took / 1e6:.0f} MB")
    assert freed >= 0.6 * took


def test_a_transcription_right_after_an_unload_loads_the_model_again(
    unload_server: ServerProcess, dev_set: list[Clip]
) -> None:
    load(unload_server, BASE)
    assert unload(unload_server, BASE, "/api/ps").status_code == 200  # speaches' route does the same
    assert loaded(unload_server)[BASE] is False
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    deadline = time.monotonic() + 120
    while True:
        r = httpx.post(unload_server.base_url + "/v1/audio/transcriptions", files={"file": clip.path.open("rb")},
                       data={"model": BASE}, timeout=120)  # fmt: skip
        if r.status_code != 503:
            break
        assert r.json()["error"]["code"] == "model_loading", r.text  # past --model-load-wait-s: its load goes on
        assert time.monotonic() < deadline
        time.sleep(float(r.headers["Retry-After"]))
    assert r.status_code == 200, r.text
    assert "forward" in r.json()["text"].lower()
    assert loaded(unload_server)[BASE] is True


@pytest.mark.parametrize("model", [DEFAULT, "whisper-1"])
def test_the_default_model_cannot_be_unloaded(unload_server: ServerProcess, model: str) -> None:
    client = openai.OpenAI(base_url=unload_server.base_url + "/v1", api_key="not-needed", max_retries=0)
    with pytest.raises(openai.ConflictError) as refused:
        client.models.delete(model)
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "model_in_use", error
    assert "default model" in error["message"] and "--model" in error["message"]
    assert loaded(unload_server)[DEFAULT] is True
    assert httpx.get(unload_server.base_url + "/api/ps").json()["models"][0] == DEFAULT


def test_an_unknown_model_is_a_404(unload_server: ServerProcess) -> None:
    for route in ("/v1/models", "/api/ps"):
        r = unload(unload_server, "whisper-nonexistent", route)
        assert r.status_code == 404, r.text
        error = r.json()["error"]
        assert (error["code"], error["param"]) == ("model_not_found", "model")
        assert DEFAULT in error["message"]  # it lists the ids there are


def test_a_model_not_loaded_is_nothing_to_do(unload_server: ServerProcess) -> None:
    unload(unload_server, BASE)
    unloads = metric(httpx.get(unload_server.base_url + "/metrics").text, "voxlane_engine_model_unloads_total")
    for _ in range(2):
        r = unload(unload_server, BASE)
        assert r.status_code == 200, r.text
        assert r.json()["loaded"] is False
    page = httpx.get(unload_server.base_url + "/metrics").text
    assert metric(page, "voxlane_engine_model_unloads_total") == unloads
    assert loaded(unload_server)[BASE] is False
