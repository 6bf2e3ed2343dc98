"""--audio-preprocess-pool process: decoding and features in worker processes give the same answers."""

from __future__ import annotations

import httpx

from tests.conftest import running_server
from tests.wer import normalise


def test_process_pool_transcribes_short_and_long_audio(dev_set) -> None:
    with running_server("--audio-preprocess-pool", "process", "--audio-preprocess-workers", "2") as srv:
        short = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
        r = httpx.post(
            srv.base_url + "/v1/audio/transcriptions",
            files={"file": short.path.open("rb")},
            data={"model": "whisper-1"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        assert normalise(r.json()["text"]) == "go forward 10 meters"
        long = next(c for c in dev_set if c.duration_s > 60)
        r = httpx.post(
            srv.base_url + "/v1/audio/transcriptions",
            files={"file": long.path.open("rb")},
            data={"model": "whisper-1", "response_format": "verbose_json"},
            timeout=300,
        )
        assert r.status_code == 200, r.text
        assert abs(r.json()["duration"] - long.duration_s) < 0.05
        assert httpx.get(srv.base_url + "/v1/audio/voices", timeout=10).status_code == 200
