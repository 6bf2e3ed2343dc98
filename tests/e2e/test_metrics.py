"""/metrics on a real server, read as Prometheus reads it: after one transcription and one speech request,
the request, first-text and first-audio histograms, the engine's batch histograms (sent by the engine
process), the queue, executor and process gauges of both processes are there, and the ones that should
have moved did."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Clip, metric

TRANSCRIBE = {"method": "POST", "route": "/v1/audio/transcriptions", "status": "200"}
SPEAK = {"method": "POST", "route": "/v1/audio/speech", "status": "200"}


def scrape(base_url: str) -> str:
    response = httpx.get(base_url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text


def test_metrics_move_with_a_transcription_and_a_speech_request(server, client, dev_set: list[Clip]) -> None:
    clip = min(dev_set, key=lambda c: c.duration_s)
    before = scrape(server.base_url)

    with clip.path.open("rb") as f:
        assert client.audio.transcriptions.create(model="whisper-1", file=f).text
    speech = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", response_format="wav")
    assert len(speech.content) > 1000
    assert httpx.get(server.base_url + "/v1/models/whisper-1").status_code == 200
    assert httpx.get(server.base_url + "/no/such/path").status_code == 404
    # The engine sends its counters once a second: wait for the ones sent after this work was done (a
    # snapshot taken between a window's first pass and its continuation shows that pass's batch, and the
    # continuation still waiting).
    deadline = time.monotonic() + 5
    while True:
        after = scrape(server.base_url)
        try:
            batches = metric(after, "voxlane_engine_batch_size_windows_count")
            idle = (
                metric(after, "voxlane_engine_waiting_windows") == 0 == metric(after, "voxlane_engine_running_batches")
            )
            moved_on = batches > (
                metric(before, "voxlane_engine_batch_size_windows_count")
                if _has(before, "voxlane_engine_batch_size_windows_count", {})
                else 0
            )
        except KeyError:  # no counters from the engine yet
            moved_on = idle = False
        if (moved_on and idle) or time.monotonic() > deadline:
            break
        time.sleep(0.2)

    def moved(sample: str, **labels: str) -> float:
        old = metric(before, sample, **labels) if _has(before, sample, labels) else 0.0
        return metric(after, sample, **labels) - old

    types = {family.name: family.type for family in text_string_to_metric_families(after)}
    for name in (
        "voxlane_request_duration_seconds",
        "voxlane_transcription_first_text_seconds",
        "voxlane_speech_first_audio_seconds",
        "voxlane_engine_batch_size_windows",
        "voxlane_engine_batch_duration_seconds",
        "voxlane_event_loop_stall_seconds",
    ):
        assert types[name] == "histogram", name

    # HTTP, labelled by route template, never by raw path
    assert moved("voxlane_request_duration_seconds_count", **TRANSCRIBE) == 1
    assert moved("voxlane_request_duration_seconds_sum", **TRANSCRIBE) > 0
    assert moved("voxlane_requests_total", **SPEAK) == 1
    assert moved("voxlane_requests_total", method="GET", route="/v1/models/{model_id}", status="200") == 1
    assert moved("voxlane_requests_total", method="GET", route="unmatched", status="404") == 1
    assert "/no/such/path" not in after and "whisper-1" not in after

    # transcription and speech
    assert moved("voxlane_transcription_first_text_seconds_count") == 1
    assert (
        0
        < moved("voxlane_transcription_first_text_seconds_sum")
        <= moved("voxlane_request_duration_seconds_sum", **TRANSCRIBE)
    )
    assert moved("voxlane_speech_first_audio_seconds_count") == 1
    assert moved("voxlane_audio_seconds_total") == pytest.approx(clip.duration_s, abs=0.05)
    assert moved("voxlane_windows_total") == 1
    assert moved("voxlane_speech_seconds_total") > 0.3
    assert metric(after, "voxlane_engine_queued_windows") == 0
    assert abs(metric(after, "voxlane_engine_queued_audio_seconds")) < 1e-6  # all of it came back

    # the engine process: its batch histograms, queues and process figures
    assert moved("voxlane_engine_batch_size_windows_count") >= 1
    assert moved("voxlane_engine_batch_size_windows_sum") >= 1
    assert moved("voxlane_engine_batch_duration_seconds_count") >= 1
    assert moved("voxlane_engine_batch_duration_seconds_sum") > 0
    assert metric(after, "voxlane_engine_waiting_windows") == 0
    assert metric(after, "voxlane_engine_running_batches") == 0
    assert metric(after, "voxlane_engine_waiting_speech_units") == 0
    assert metric(after, "voxlane_engine_up") == 1
    assert metric(after, "voxlane_engine_restarts_total") == 0
    assert metric(after, "voxlane_engine_process_resident_memory_bytes") > 50e6  # it holds the models
    assert moved("voxlane_engine_process_cpu_seconds_total") > 0
    assert metric(after, "voxlane_engine_process_open_fds") > 0

    # the API process: executor pools, the event loop, its own process figures
    for pool in ("audio", "text", "files", "encode-0"):
        assert metric(after, "voxlane_executor_workers", pool=pool) >= 1
        assert metric(after, "voxlane_executor_busy_workers", pool=pool) == 0
        assert metric(after, "voxlane_executor_queued_jobs", pool=pool) == 0
    assert metric(after, "voxlane_executor_busy_workers", pool="metrics") == 1  # rendering this very page
    assert moved("voxlane_event_loop_stall_seconds_count") > 0
    assert metric(after, "process_resident_memory_bytes") > 50e6
    assert moved("process_cpu_seconds_total") > 0
    assert metric(after, "process_open_fds") > 0


def test_metrics_speak_openmetrics_when_asked(server) -> None:
    response = httpx.get(server.base_url + "/metrics", headers={"Accept": "application/openmetrics-text"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")


def _has(text: str, sample: str, labels: dict[str, str]) -> bool:
    try:
        metric(text, sample, **labels)
    except KeyError:
        return False
    return True
