"""voxlane on Ray Serve (``voxlane serve --ray-address``): a local Ray head on 127.0.0.1, two engine replicas of
the bundled models, the stock openai client. A replica killed with SIGKILL costs only the calls it held (a
503 with Retry-After), Ray starts another, and a replica removed by the autoscaler is drained first.
Nothing of the cluster is left behind."""

from __future__ import annotations

import base64
import io
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import av
import httpx
import jiwer
import openai
import pytest
from whisper_normalizer.english import EnglishTextNormalizer

from tests.conftest import Clip, RayCluster, ServerProcess, metric, ray_server

ENGINE = "VoxlaneEngine"
_normalise = EnglishTextNormalizer()


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    cluster = RayCluster(num_cpus=4)
    try:
        yield cluster
    finally:
        left = cluster.stop()
    assert not left, f"Ray processes left behind: {left}"


@pytest.fixture(scope="module")
def ray_voxlane(cluster: RayCluster) -> Iterator[ServerProcess]:
    with ray_server(cluster, "--replicas", "2") as srv:
        yield srv


def _client(srv: ServerProcess, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key="not-needed", max_retries=retries, timeout=120)


def _wordiest(dev_set: list[Clip], below_s: float) -> Clip:
    """The clip shorter than ``below_s`` with the most words in its reference (a WER worth reading)."""
    return max((c for c in dev_set if c.duration_s < below_s), key=lambda c: len(c.text.split()))


def _wer(reference: str, hypothesis: str) -> float:
    return jiwer.wer(_normalise(reference), _normalise(hypothesis))


def test_transcription_and_streaming_speech_through_the_openai_client(ray_voxlane, dev_set) -> None:
    client = _client(ray_voxlane)
    clip = _wordiest(dev_set, 20.0)
    with clip.path.open("rb") as f:
        text = client.audio.transcriptions.create(model="whisper-1", file=f).text
    assert _wer(clip.text, text) < 0.3, text

    with clip.path.open("rb") as f:  # SSE transcription: deltas, then the whole text
        events = list(client.audio.transcriptions.create(model="whisper-1", file=f, stream=True))
    assert events[-1].type == "transcript.text.done"
    assert events[-1].text.strip() == text.strip()
    assert any(e.type == "transcript.text.delta" for e in events)

    speech_text = "The quick brown fox jumps over the lazy dog. Then it runs into the forest, far away."
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=speech_text, response_format="wav", extra_body={"stream_format": "sse"}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert '"speech.audio.done"' in lines[-1]
    audio = b"".join(base64.b64decode(_field(line, "audio")) for line in lines[:-1])
    with av.open(io.BytesIO(audio)) as container:
        seconds = sum(frame.samples for frame in container.decode(audio=0)) / 22050
    assert 3.0 < seconds < 10.0

    # The same error shapes as the direct path: OpenAI's JSON, the right status, what to send instead.
    with pytest.raises(openai.NotFoundError) as err, clip.path.open("rb") as f:
        client.audio.transcriptions.create(model="whisper-9", file=f)
    assert "send model='whisper-tiny.en'" in err.value.body["message"]


def _field(line: str, name: str) -> str:
    import json

    return json.loads(line.removeprefix("data: "))[name]


def _transcribe(srv: ServerProcess, clip: Clip) -> tuple[int, str, str | None, float]:
    """(status, body, Retry-After, when it was answered: time.monotonic()) of one transcription over HTTP."""
    with clip.path.open("rb") as f:
        r = httpx.post(
            srv.base_url + "/v1/audio/transcriptions",
            files={"file": (clip.path.name, f)},
            data={"model": "whisper-1"},
            timeout=120,
        )
    return r.status_code, r.text, r.headers.get("retry-after"), time.monotonic()


def test_a_killed_replica_fails_only_its_calls_and_is_replaced(ray_voxlane, cluster, dev_set) -> None:
    replicas = cluster.replica_pids(ENGINE)
    assert len(replicas) == 2, cluster.processes()
    long_clip = max(dev_set, key=lambda c: c.duration_s)  # several 30 s windows, spread over both replicas
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(_transcribe, ray_voxlane, long_clip) for _ in range(6)]
        _wait_for_windows_in_flight(ray_voxlane, 18)
        time.sleep(3.0)  # admitted windows are sent as the audio pool computes their features
        os.kill(replicas[0], signal.SIGKILL)
        killed_at = time.monotonic()
        results = [f.result(timeout=120) for f in futures]
    failed = [(status, body, retry, at - killed_at) for status, body, retry, at in results if status != 200]
    assert failed, "no request in flight lost a window on the killed replica"
    for status, body, retry, _ in failed:
        assert status == 503, body
        assert '"type":"server_error"' in body.replace(" ", "") and "retry in" in body
        assert retry is not None and int(retry) >= 1
    failed_within_s = max(after_s for *_, after_s in failed)
    assert failed_within_s < 30.0  # bounded: no request waits on a dead replica

    # New requests go to the replica left (or, while Ray still routes to the dead one, a 503 the client
    # retries); the openai client's own retries make them succeed.
    clip = _wordiest(dev_set, 20.0)
    client = _client(ray_voxlane, retries=3)
    for _ in range(4):
        with clip.path.open("rb") as f:
            assert _wer(clip.text, client.audio.transcriptions.create(model="whisper-1", file=f).text) < 0.3

    deadline = time.monotonic() + 120.0  # Ray starts a new replica, which loads its models
    while time.monotonic() < deadline:
        pids = cluster.replica_pids(ENGINE)
        if len(pids) == 2 and replicas[0] not in pids:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"Ray did not start a second replica again: {cluster.replica_pids(ENGINE)}")
    print(f"\nreplica killed: {len(failed)}/6 requests in flight got 503, within {failed_within_s:.1f} s of the "
          f"kill; a new replica process after {time.monotonic() - killed_at:.1f} s")  # fmt: skip
    assert httpx.get(ray_voxlane.base_url + "/health", timeout=10).json()["status"] == "ok"


def _wait_for_windows_in_flight(srv: ServerProcess, count: int, timeout_s: float = 60.0) -> None:
    """Until the ingress has admitted ``count`` windows that have not come back from the replicas (/metrics)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if metric(httpx.get(srv.base_url + "/metrics", timeout=10).text, "voxlane_engine_queued_windows") >= count:
            return
        time.sleep(0.1)
    pytest.fail(f"fewer than {count} windows were ever in flight")


def test_scale_down_drains_the_replica_it_removes(ray_voxlane, cluster, dev_set) -> None:
    """Autoscaling between 1 and 2 replicas, starting at 2, with a target far above the load: Ray removes
    one replica while requests keep arriving on both; none of them fails."""
    ray_voxlane.stop(timeout_s=60.0)  # this test's deployment replaces the module's
    assert cluster.replica_pids(ENGINE) == []
    flags = ("--replicas", "2", "--min-replicas", "1", "--max-replicas", "2")
    with ray_server(cluster, *flags, "--target-ongoing-requests", "100", "--downscale-delay-s", "3") as srv:
        assert len(cluster.replica_pids(ENGINE)) == 2
        clip = _wordiest(dev_set, 40.0)
        statuses: list[int] = []
        deadline = time.monotonic() + 90.0
        with ThreadPoolExecutor(3) as pool:
            while time.monotonic() < deadline and len(cluster.replica_pids(ENGINE)) == 2:
                statuses += [status for status, *_ in pool.map(lambda _: _transcribe(srv, clip), range(3))]
            scaled_down = len(cluster.replica_pids(ENGINE)) == 1
            statuses += [status for status, *_ in pool.map(lambda _: _transcribe(srv, clip), range(3))]
        assert scaled_down, "the autoscaler kept 2 replicas for 90 s under a load far below its target"
        assert statuses and set(statuses) == {200}, statuses
        print(f"\nscale-down 2 -> 1 under load: {len(statuses)} requests, all 200")
