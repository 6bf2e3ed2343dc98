"""Shared fixtures: the dev data set and real ``voxlane serve`` subprocesses on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

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
def running_server(*flags: str, env: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """A healthy ``voxlane serve`` with these flags for the block's duration; SIGTERM at the end."""
    srv = ServerProcess(*flags, env=env)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop(timeout_s=60.0)


class RayCluster:
    """A local Ray head on 127.0.0.1 only (``RAY_LOOPBACK`` keeps Ray from swapping in the machine's
    address), in its own temporary directory; ``stop`` ends every process it started, by pid."""

    RAY_LOOPBACK: ClassVar[dict[str, str]] = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    MARK: ClassVar[str] = "VOXLANE_TEST_RAY_CLUSTER"
    """Set to the cluster's temporary directory in the environment of ``ray start``: Ray's daemons pass their
    environment to the workers they start, and those to their children, so every process of the cluster
    carries it, even one whose parent died and left it to init (or a subreaper)."""

    OWN_CLEANUP_OFF: ClassVar[dict[str, str]] = {
        "RAY_process_group_cleanup_enabled": "0",
        "RAY_kill_child_processes_on_worker_exit": "0",
        "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper": "0",
    }
    """Ray kills what a dead worker left behind (its process group, its children); off, so that the tests see
    voxlane's own clean-up, the one every Ray version and setup gets (an engine dies with its replica, by its
    parent-death signal)."""

    def __init__(self, num_cpus: int = 4) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="vxray-", dir="/tmp")  # short: Ray's socket paths have a limit
        self.address = f"127.0.0.1:{free_port()}"
        self.env = {**os.environ, **self.RAY_LOOPBACK, **self.OWN_CLEANUP_OFF, self.MARK: self.temp_dir}
        ray = str(Path(sys.executable).with_name("ray"))
        subprocess.run(
            [ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", self.address.split(":")[1],
             "--num-cpus", str(num_cpus), "--include-dashboard", "false", "--disable-usage-stats",
             "--temp-dir", self.temp_dir],
            env=self.env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def processes(self) -> dict[int, str]:
        """pid -> command line of every live process of this cluster: those started with its temporary
        directory on their command line (GCS, raylet, monitors) or with its ``MARK`` in their environment
        (everything Ray started, and what that started: found even when reparented), and all their
        descendants."""
        mark = f"{self.MARK}={self.temp_dir}".encode()
        procs: dict[int, tuple[int, str]] = {}
        marked = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    if mark in (entry / "environ").read_bytes().split(b"\0"):
                        marked.add(int(entry.name))
                except (OSError, ValueError, IndexError):
                    continue
                procs[int(entry.name)] = (ppid, cmdline)
        ours = {pid for pid, (_, cmd) in procs.items() if self.temp_dir in cmd} | (marked & procs.keys())
        ours -= {os.getpid()}
        grown = True
        while grown:
            children = {pid for pid, (ppid, _) in procs.items() if ppid in ours} - ours
            grown = bool(children)
            ours |= children
        return {pid: procs[pid][1] for pid in ours}

    def replica_pids(self, deployment: str) -> list[int]:
        """Live replica processes of a deployment of the app 'voxlane' (Ray titles them ray::ServeReplica:...)."""
        title = f"ray::ServeReplica:voxlane:{deployment}"
        return sorted(pid for pid, cmd in self.processes().items() if cmd.startswith(title))

    def voxlane_children(self) -> dict[int, int]:
        """pid -> parent pid of the live voxlane child processes of this cluster (engines, the ingress's
        worker pools: named ``voxlane-*``), wherever their parent is."""
        found = {}
        for pid in self.processes():
            try:
                state, ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError):
                continue  # gone meanwhile
            if state != "Z" and comm(pid).startswith("voxlane-"):
                found[pid] = int(ppid)
        return found

    def engines(self) -> dict[int, int]:
        """pid -> parent pid of the live engine processes of this cluster (one per engine replica)."""
        return {pid: ppid for pid, ppid in self.voxlane_children().items() if comm(pid) == "voxlane-engine"}

    def wait_without_voxlane_children(self, timeout_s: float = 30.0) -> None:
        """Until no voxlane child process of this cluster is left (the app is gone), else fail."""
        deadline = time.monotonic() + timeout_s
        while (left := self.voxlane_children()) and time.monotonic() < deadline:
            time.sleep(0.2)
        found = {pid: (parent, self.processes().get(pid)) for pid, parent in left.items()}
        assert not left, f"voxlane processes outlived their Ray app (pid: parent, command): {found}"

    def stop(self) -> list[str]:
        """End every process of the cluster (SIGTERM, then SIGKILL); return those still alive (none, or a bug)."""
        procs = self.processes()
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            for pid in procs:
                with suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in procs):
                time.sleep(0.1)
        left = [cmd for pid, cmd in procs.items() if pid_alive(pid)]
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return left


def comm(pid: int) -> str:
    """A process's name (/proc/PID/comm; voxlane's children name themselves), or '' once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; it waits for its parent to read its exit


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
