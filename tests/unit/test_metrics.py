"""The /metrics registry without a server: requests labelled by route template, the engine's counters
shown from its latest EngineStats, and nothing of a dead engine's queues."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.conftest import metric
from tests.unit.test_engine_client import FakeEngine, run
from voxlane.engine.client import EngineClient
from voxlane.engine.stats import StatsRecorder
from voxlane.server.executors import PoolLoad
from voxlane.server.metrics import Metrics, RequestMetrics


def test_requests_are_labelled_by_route_template_and_timed() -> None:
    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: str) -> dict[str, str]:
        return {"id": item_id}

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    app.add_middleware(RequestMetrics)
    metrics = Metrics()
    app.state.voxlane = SimpleNamespace(metrics=metrics)
    with TestClient(app, raise_server_exceptions=False) as client:
        for item_id in ("a", "b", "c"):
            assert client.get(f"/items/{item_id}").status_code == 200
        assert client.get("/nowhere").status_code == 404
        assert client.get("/boom").status_code == 500
    text = metrics.render("")[0].decode()
    ok = {"method": "GET", "route": "/items/{item_id}", "status": "200"}
    assert metric(text, "voxlane_requests_total", **ok) == 3
    assert metric(text, "voxlane_request_duration_seconds_count", **ok) == 3
    assert metric(text, "voxlane_request_duration_seconds_sum", **ok) > 0
    assert metric(text, "voxlane_requests_total", route="unmatched", status="404") == 1
    assert metric(text, "voxlane_requests_total", route="/boom", status="500") == 1
    assert "/items/a" not in text


class _Engine:
    def __init__(self, healthy: bool) -> None:
        self.healthy = healthy
        self.queued_windows = 5
        self.speech_streams = 2
        recorder = StatsRecorder()
        recorder.batch(4, 0.3)
        recorder.batch(8, 0.7)
        self.stats = recorder.snapshot(waiting_windows=3, waiting_speech_units=1, running_batches=2)


class _Executors:
    def load(self) -> list[PoolLoad]:
        return [PoolLoad("audio", 2, 2, 3)]


def test_the_engine_counters_come_from_its_latest_stats_message() -> None:
    metrics = Metrics()
    metrics.watch(_Engine(healthy=True), _Executors())  # type: ignore[arg-type]
    text = metrics.render("")[0].decode()
    assert metric(text, "voxlane_engine_up") == 1
    assert metric(text, "voxlane_engine_queued_windows") == 5
    assert metric(text, "voxlane_engine_waiting_windows") == 3
    assert metric(text, "voxlane_engine_running_batches") == 2
    assert metric(text, "voxlane_engine_batch_size_windows_bucket", le="4.0") == 1
    assert metric(text, "voxlane_engine_batch_size_windows_bucket", le="+Inf") == 2
    assert metric(text, "voxlane_engine_batch_size_windows_sum") == 12
    assert metric(text, "voxlane_engine_batch_duration_seconds_bucket", le="0.5") == 1
    assert metric(text, "voxlane_engine_process_resident_memory_bytes") > 0  # the stats' pid: this process here
    assert metric(text, "voxlane_executor_busy_workers", pool="audio") == 2
    assert metric(text, "voxlane_executor_queued_jobs", pool="audio") == 3
    assert metric(text, "process_resident_memory_bytes") > 0


def test_a_dead_engine_shows_no_queues_and_no_process() -> None:
    metrics = Metrics()
    metrics.watch(_Engine(healthy=False), _Executors())  # type: ignore[arg-type]
    text = metrics.render("")[0].decode()
    assert metric(text, "voxlane_engine_up") == 0
    assert metric(text, "voxlane_engine_batch_size_windows_count") == 2  # what it did stays counted
    assert "voxlane_engine_waiting_windows" not in text
    assert "voxlane_engine_process_resident_memory_bytes" not in text


def test_openmetrics_when_the_scraper_asks() -> None:
    body, content_type = Metrics().render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


def test_the_client_keeps_the_engines_latest_stats() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        assert client.stats is None
        for waiting in (7, 2):
            await engine.send(StatsRecorder().snapshot(waiting, 0, 0))
        for _ in range(200):  # the client's receive task folds them in as they come
            if client.stats is not None and client.stats.waiting_windows == 2:
                break
            await asyncio.sleep(0.01)
        assert client.stats is not None and client.stats.waiting_windows == 2

    run(scenario)
