"""While 16 long uploads are in flight, the event loop never stalls for 50 ms and /health keeps answering;
when their clients go away, their windows leave the engine."""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

from tests.conftest import Clip, metric, stall_reports

STALL_LIMIT_S = 0.05


def stall_counts(metrics_text: str) -> tuple[int, int]:
    """(samples, samples whose stall was <= 50 ms) from the loop monitor's histogram."""
    total = metric(metrics_text, "voxlane_event_loop_stall_seconds_count")
    within = metric(metrics_text, "voxlane_event_loop_stall_seconds_bucket", le="0.05")
    return int(total), int(within)


def queued_windows(metrics_text: str) -> int:
    return int(metric(metrics_text, "voxlane_engine_queued_windows"))


async def _load_and_probe(base_url: str, audio: bytes, uploads: int, probe_s: float) -> tuple[list[float], list[int]]:
    async def upload() -> None:
        async with httpx.AsyncClient(timeout=300) as c:
            await c.post(
                base_url + "/v1/audio/transcriptions", files={"file": ("long.m4a", audio)}, data={"model": "whisper-1"}
            )

    tasks = [asyncio.create_task(upload()) for _ in range(uploads)]
    latencies: list[float] = []
    statuses: list[int] = []
    async with httpx.AsyncClient(timeout=5) as probe:
        end = time.monotonic() + probe_s
        while time.monotonic() < end:
            start = time.perf_counter()
            r = await probe.get(base_url + "/health")
            latencies.append(time.perf_counter() - start)
            statuses.append(r.status_code)
            await asyncio.sleep(0.02)
    for t in tasks:  # the clients go away mid-transcription
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return latencies, statuses


def test_event_loop_never_stalls_under_16_long_uploads(server, dev_set: list[Clip]) -> None:
    # A compressed, 44.1 kHz stereo file: decoding and resampling it takes a core 0.1-0.2 s, which the loop
    # would feel at once if that work ran on it.
    clip = next(c for c in dev_set if c.duration_s > 60 and c.path.suffix == ".m4a")
    before = httpx.get(server.base_url + "/metrics").text
    latencies, statuses = asyncio.run(_load_and_probe(server.base_url, clip.path.read_bytes(), 16, probe_s=8.0))
    after = httpx.get(server.base_url + "/metrics").text

    total_before, within_before = stall_counts(before)
    total_after, within_after = stall_counts(after)
    stalls_over_limit = (total_after - total_before) - (within_after - within_before)
    p50 = statistics.median(latencies)
    p99 = statistics.quantiles(latencies, n=100)[98]
    print(
        f"/health under load: {len(latencies)} probes, p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"loop samples {total_after - total_before}, stalls > 50 ms: {stalls_over_limit}, "
        f"{stall_reports(after)}"
    )
    reports_before, reports_after = stall_reports(before), stall_reports(after)
    not_ours = sum(reports_after[c] - reports_before[c] for c in ("host_paused", "cpu_wait"))
    assert total_after - total_before > 500  # the monitor really ran through the load
    # Stalls of 50 ms or more are allowed only when the hypervisor did not run the machine (steal time), or
    # the OS kept the loop thread waiting for a core (this test's client runs beside the server on 2 cores):
    # not when the loop ran code of its own or waited for the GIL.
    assert reports_after["other"] == reports_before["other"], server.log()
    assert stalls_over_limit <= not_ours, server.log()
    assert set(statuses) == {200}

    # The 16 clients left: their windows are aborted, not transcribed for nobody.
    deadline = time.monotonic() + 10
    while queued_windows(httpx.get(server.base_url + "/metrics").text) != 0:
        assert time.monotonic() < deadline, "windows of gone clients are still queued"
        time.sleep(0.1)
