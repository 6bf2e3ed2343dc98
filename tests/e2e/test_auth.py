"""API keys end to end: a real server started with keys (from the variable and from a file), the stock
openai client with its api_key=, and the routes that stay open."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import Clip, ServerProcess, metric

ENV_KEYS = ("key-one-from-env-1111", "key-two-from-env-2222")
FILE_KEY = "key-from-the-file-3333"
ALL_KEYS = (*ENV_KEYS, FILE_KEY)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    keys_file = tmp_path_factory.mktemp("keys") / "api-keys"
    keys_file.write_text(f"# one key a line\n{FILE_KEY}\n")
    srv = ServerProcess(
        "--api-keys-file", str(keys_file), "--log-level", "info", env={"VOXLANE_API_KEY": ",".join(ENV_KEYS)}
    )
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def client(server: ServerProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=120)


def clip(dev_set: list[Clip]) -> Clip:
    return next(c for c in dev_set if c.path.name == "cmu_goforward.wav")


@pytest.mark.parametrize("key", ALL_KEYS)
def test_the_openai_client_with_a_right_key_transcribes_and_speaks(
    keyed_server: ServerProcess, dev_set: list[Clip], key: str
) -> None:
    c = client(keyed_server, key)
    text = c.audio.transcriptions.create(model="whisper-1", file=clip(dev_set).path.open("rb")).text
    assert "forward" in text.lower()
    audio = c.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", response_format="wav")
    assert audio.content[:4] == b"RIFF" and len(audio.content) > 10_000
    assert "tts-1" in {m.id for m in c.models.list().data}


def test_the_openai_client_with_a_wrong_key_gets_an_authentication_error(
    keyed_server: ServerProcess, dev_set: list[Clip]
) -> None:
    c = client(keyed_server, "sk-not-a-key-of-this-server-9999")
    with pytest.raises(openai.AuthenticationError) as exc:
        c.audio.transcriptions.create(model="whisper-1", file=clip(dev_set).path.open("rb"))
    assert exc.value.status_code == 401
    assert exc.value.body == {
        "message": "Incorrect API key provided: sk-***9999. Send one of the keys this server was started with "
        "(--api-key, VOXLANE_API_KEY or --api-keys-file).",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    with pytest.raises(openai.AuthenticationError):
        c.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")
    with pytest.raises(openai.AuthenticationError):
        c.models.list()


def test_no_key_is_a_401_and_health_and_metrics_stay_open(keyed_server: ServerProcess) -> None:
    base = keyed_server.base_url
    for method, path in [("GET", "/v1/models"), ("GET", "/v1/audio/voices"), ("POST", "/v1/audio/speech")]:
        r = httpx.request(method, base + path, json={"model": "tts-1", "voice": "joe", "input": "Hi."})
        assert r.status_code == 401, path
        assert r.json()["error"]["code"] == "invalid_api_key"
        assert "didn't provide an API key" in r.json()["error"]["message"]
    assert httpx.get(base + "/health").json() == {"status": "ok", "engine_restarts": 0}
    metrics = httpx.get(base + "/metrics")
    assert metrics.status_code == 200
    # Refused before routing, so under the route label "unmatched": counted all the same.
    assert metric(metrics.text, "voxlane_requests_total", status="401") >= 1


def test_the_keys_never_reach_the_log(keyed_server: ServerProcess) -> None:
    httpx.get(keyed_server.base_url + "/v1/models", headers={"Authorization": f"Bearer {ENV_KEYS[0]}"})
    log = Path(keyed_server.log_path).read_text(errors="replace")
    assert "API keys: 3; every /v1 route needs one" in log
    for key in ALL_KEYS:
        assert key not in log


def test_voxlane_bench_measures_a_server_with_keys(keyed_server: ServerProcess, tmp_path: Path) -> None:
    from voxlane.cli import main

    def bench(*key: str) -> dict[str, Any]:
        argv = ["bench", "serve", "--backend", "openai-audio-speech", "--base-url", keyed_server.base_url]
        argv += ["--num-prompts", "2", "--num-warmups", "0", "--result-dir", str(tmp_path), "--result-filename"]
        assert main([*argv, "r.json", *key]) == 0
        return json.loads((tmp_path / "r.json").read_text())

    assert bench("--api-key", FILE_KEY)["completed"] == 2
    refused = bench("--api-key", "wrong-key")
    assert refused["failed"] == 2 and "401" in refused["errors"][0]["error"]
