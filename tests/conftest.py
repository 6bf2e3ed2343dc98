"""Shared fixtures: the dev data set and real ``voxlane serve`` subprocesses on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A real ``voxlane serve`` on 127.0.0.1 with its own port."""

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "voxlane.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *flags,
        ]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"voxlane-test-{self.port}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, start_new_session=True
        )

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"voxlane serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"voxlane serve did not become healthy in {timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> float:
        """Send ``sig``; return how long the server took to exit."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return time.monotonic() - start


@contextmanager
def running_server(*flags: str) -> Iterator[ServerProcess]:
    """A healthy ``voxlane serve`` with these flags for the block's duration; SIGTERM at the end."""
    srv = ServerProcess(*flags)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """The default server: bundled models, 2 preprocessing workers, batching on."""
    with running_server("--audio-preprocess-workers", "2", "--max-batch-size", "8") as srv:
        yield srv


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
    """From /metrics: event-loop stalls of --loop-stall-report-ms or more, by cause (host_paused, other)."""
    name = "voxlane_event_loop_stall_reports_total"
    return {cause: int(metric(metrics_text, name, cause=cause)) for cause in ("host_paused", "other")}
