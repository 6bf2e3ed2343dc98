"""Admission control end to end: the silent-FLAC bomb keeps the API process's memory flat and
other users served; past a queue limit a request gets 429 with Retry-After while admitted ones finish and
/health stays fast."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from tests.conftest import Clip, ServerProcess, running_server
from voxlane.bench.health_probe import HealthProbe

BOMB_HOURS = 2.9
RSS_GROWTH_LIMIT_MB = 100
"""The README: the four bombs took the API process from 114 MB to 141 MB (27 MB; 29 MB here beside other work);
before the fix, to 2,748 MB. 100 MB leaves the allocator's noise room and still fails on any copy of the audio
(one bomb's 2.9 h as int16 is 334 MB)."""
SHORT_LATENCY_LIMIT_S = 8.0
"""The README: a short clip sent beside the bombs is answered in 0.7-4.3 s on an idle 2-core machine; 8 s is
that with almost 2x margin, and under the 10-90 s the clip waited before the fix (decodes hogging the pool)."""
HEALTH_P50_LIMIT_MS = 20.0
HEALTH_P99_LIMIT_MS = 100.0
"""/health under the flood of the 429 test, probed every 20 ms from a process of its own (as the benchmark
does): the README's 10x overload run measured 2.8 ms p50 and 6.6 ms p99 on an idle 2-core machine. The limits
leave ~7x and ~15x of room for a busier CI machine; a loop blocked by a decode or an upload's parse takes
hundreds of ms, which they catch."""


def silent_flac(hours: float = BOMB_HOURS, rate: int = 16000) -> bytes:
    """Hours of digital silence with a few samples of dither: about 1 MB of FLAC, 0.7 GB as float32."""
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    total, block = int(hours * 3600 * rate), rate * 60
    with sf.SoundFile(buf, "w", samplerate=rate, channels=1, format="FLAC", subtype="PCM_16") as f:
        for start in range(0, total, block):
            x = np.zeros(min(block, total - start), dtype=np.int16)
            x[rng.integers(0, len(x), 8)] = rng.choice(np.array([-1, 1], dtype=np.int16), 8)
            f.write(x)
    return buf.getvalue()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def by_name(dev_set: list[Clip], name: str) -> Clip:
    return next(c for c in dev_set if c.path.name == name)


@pytest.fixture(scope="module")
def own_server() -> Iterator[ServerProcess]:
    with running_server() as srv:
        yield srv


def test_four_silent_flac_bombs_keep_memory_flat_and_others_served(own_server: ServerProcess, dev_set) -> None:
    bomb = silent_flac()
    assert len(bomb) < 25 * 1024 * 1024  # under the upload limit
    short = by_name(dev_set, "cmu_goforward.wav")
    client = openai.OpenAI(base_url=own_server.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
    pid = own_server.proc.pid
    # One clip first, so that what any request allocates once (pools, buffers, the VAD) is in the baseline.
    assert "forward" in client.audio.transcriptions.create(model="whisper-1", file=short.path.open("rb")).text.lower()
    before = rss_mb(pid)

    def fire(_: int) -> httpx.Response:
        return httpx.post(
            own_server.base_url + "/v1/audio/transcriptions",
            files={"file": ("silence.flac", bomb)},
            data={"model": "whisper-1", "response_format": "verbose_json"},
            timeout=300,
        )

    rss, done = [before], threading.Event()

    def sample_rss() -> None:  # no assertion in a thread: the samples are checked below
        while not done.wait(0.05):  # every 50 ms: a copy of the audio would show for seconds
            rss.append(rss_mb(pid))

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    latencies = []
    try:
        with ThreadPoolExecutor(4) as pool:
            bombs = [pool.submit(fire, i) for i in range(4)]
            while not all(b.done() for b in bombs):
                start = time.monotonic()
                text = client.audio.transcriptions.create(model="whisper-1", file=short.path.open("rb")).text
                latencies.append(time.monotonic() - start)
                assert "forward" in text.lower()
            results = [b.result() for b in bombs]
    finally:
        done.set()
        sampler.join()
    peak = max(rss)
    print(f"API RSS {before:.0f} MB before, {peak:.0f} MB at most; short clip latencies {latencies}")
    for r in results:
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["text"] == "" and abs(body["duration"] - BOMB_HOURS * 3600) < 1
    assert peak - before < RSS_GROWTH_LIMIT_MB
    assert latencies and max(latencies) < SHORT_LATENCY_LIMIT_S


def test_past_the_queue_limit_requests_get_429_with_retry_after(dev_set) -> None:
    clip = by_name(dev_set, "mfa_um.wav")  # 8.9 s: three fill a 30 s queue
    data = clip.path.read_bytes()
    with running_server("--max-queued-audio-s", "30", "--max-transcription-requests", "12") as srv:

        def fire(_: int) -> httpx.Response:
            return httpx.post(
                srv.base_url + "/v1/audio/transcriptions",
                files={"file": (clip.path.name, data)},
                data={"model": "whisper-1"},
                timeout=120,
            )

        client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        patient = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=5, timeout=120)
        # Its own process, as in the benchmark; every 5 ms: the flood lasts about a second on an idle machine, and
        # a p99 needs a few hundred probes not to be the one worst.
        probe = HealthProbe(srv.base_url + "/health", interval_s=0.005)
        probe.start()
        try:
            with ThreadPoolExecutor(16) as pool:
                responses = list(pool.map(fire, range(16)))
        finally:
            health = probe.stop()
        # The stock openai client sees a RateLimitError, and (with its retries) waits Retry-After and gets in.
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(lambda _: _outcome(client, clip), range(8)))
        with ThreadPoolExecutor(6) as pool:
            patient_outcomes = list(pool.map(lambda _: _outcome(patient, clip), range(6)))
        statuses = [r.status_code for r in responses]
        refused = [r for r in responses if r.status_code == 429]
        health_ms = sorted(s * 1000 for s in health.latencies_s)
        p50, p99 = (health_ms[min(int(q * len(health_ms)), len(health_ms) - 1)] for q in (0.5, 0.99))
        print(
            f"statuses {sorted(statuses)}; /health over {len(health_ms)} probes: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
            f"max {health_ms[-1]:.1f} ms"
        )
        assert set(statuses) <= {200, 429}, statuses
        assert refused and statuses.count(200) >= 3
        for r in refused:
            error = r.json()["error"]
            assert (error["type"], error["code"]) == ("rate_limit_error", "queue_full")
            assert "retry" in error["message"]
            assert 1 <= int(r.headers["retry-after"]) <= 60
        assert all(r.json()["text"] for r in responses if r.status_code == 200)
        assert "RateLimitError" in outcomes and "ok" in outcomes
        assert patient_outcomes == ["ok"] * 6
        # /health answered 200 to every probe (a 503 or a timeout is a failure), and fast, under the flood.
        assert health.failures == 0, health.first_errors
        assert len(health_ms) >= 100, "too few probes to say anything about /health"
        assert p50 < HEALTH_P50_LIMIT_MS and p99 < HEALTH_P99_LIMIT_MS


def _outcome(client: openai.OpenAI, clip: Clip) -> str:
    try:
        client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb"))
        return "ok"
    except openai.RateLimitError:
        return "RateLimitError"
