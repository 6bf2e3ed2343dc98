"""Shared fixtures: the dev data set and real ``voxlane serve`` subprocesses on 127.0.0.1."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from voxlane.bench.ray_cluster import RayCluster, comm, pid_alive
from voxlane.bench.server import ServerProcess, free_port, running_server

__all__ = ["RayCluster", "ServerProcess", "comm", "free_port", "pid_alive", "running_server"]

ROOT = Path(__file__).resolve().parent.parent
DEV_DIR = Path(os.environ.get("VOXLANE_DEV_DATA", ROOT.parent / "shared" / "data" / "dev"))


@dataclass(frozen=True)
class Clip:
    path: Path
    text: str
    duration_s: float


def load_dev_set() -> list[Clip]:
    manifest = DEV_DIR / "manifest.jsonl"
    if not manifest.is_file():
        pytest.fail(f"the dev data set is missing: {manifest} (it ships beside the repo in ../shared/data/dev)")
    clips = []
    for line in manifest.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            clips.append(Clip(DEV_DIR / row["audio"], row["text"], float(row["duration_s"])))
    return clips


@pytest.fixture(scope="session")
def dev_set() -> list[Clip]:
    return load_dev_set()


@contextmanager
def ray_server(cluster: RayCluster, *flags: str) -> Iterator[ServerProcess]:
    """``voxlane serve --ray-address`` on ``cluster``: one CPU per engine replica, so that two fit on two cores.
    Once it has stopped, none of its engines or worker processes may be left on the cluster."""
    with running_server(
        "--ray-address", cluster.address, "--cpus-per-replica", "1", *flags, env=cluster.RAY_LOOPBACK
    ) as srv:
        yield srv
    cluster.wait_without_voxlane_children()


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """The default server: bundled models, 2 preprocessing workers, batching on. With VOXLANE_TEST_RAY=1 the
    same server deployed on a local Ray cluster (2 engine replicas), so that any e2e test runs on that path."""
    flags = ("--audio-preprocess-workers", "2", "--max-batch-size", "8")
    if os.environ.get("VOXLANE_TEST_RAY") != "1":
        with running_server(*flags) as srv:
            yield srv
        return
    cluster = RayCluster()
    try:
        with ray_server(cluster, "--replicas", "2", *flags) as srv:
            yield srv
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def client(server: ServerProcess):
    from openai import OpenAI

    return OpenAI(base_url=server.base_url + "/v1", api_key="not-needed", max_retries=0, timeout=300)


def metric(metrics_text: str, sample: str, **labels: str) -> float:
    """One sample's value on a /metrics page: ``sample`` named as the page writes it (``..._total``,
    ``..._bucket``), the first whose labels include ``labels``."""
    for family in text_string_to_metric_families(metrics_text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError(f"no sample {sample} {labels} on /metrics")


def stall_reports(metrics_text: str) -> dict[str, int]:
    """From /metrics: event-loop stalls of --loop-stall-report-ms or more, by cause (host_paused, cpu_wait,
    other)."""
    name = "voxlane_event_loop_stall_reports_total"
    return {cause: int(metric(metrics_text, name, cause=cause)) for cause in ("host_paused", "cpu_wait", "other")}
