"""A local Ray cluster on 127.0.0.1 for tests and benchmarks of the Ray Serve path: a head started with
``ray start`` in a temporary directory of its own, and every process it started found (and ended) by pid."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import ClassVar

from voxlane.bench.server import free_port


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
