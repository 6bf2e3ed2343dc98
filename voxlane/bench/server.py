"""A real ``voxlane serve`` in a child process, for tests and benchmarks: started with flags and environment
on a free port of 127.0.0.1, ready once GET /health answers 200, stopped with SIGTERM and then SIGKILL.

    with running_server("--max-batch-size", "8") as srv:
        httpx.get(srv.base_url + "/v1/models")

A server that does not start raises :class:`ServerStartError` with the end of its log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

LOOPBACK = "127.0.0.1"
VOXLANE = (sys.executable, "-m", "voxlane.cli")
"""The ``voxlane`` command of this interpreter (the worktree's code when it is first on PYTHONPATH)."""


class ServerStartError(RuntimeError):
    """The server exited before it was ready, or did not answer /health 200 in time."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


class ServerProcess:
    """A server on 127.0.0.1 with its own port: ``voxlane serve`` with ``flags``, or ``command`` (another
    program that takes ``--port`` and binds 127.0.0.1 itself) with ``flags``.

    Its output goes to ``log_path`` (a new file in the temporary directory unless given). It runs in a
    session of its own, so that :meth:`stop` can kill the server's children along with it.
    """

    def __init__(
        self,
        *flags: str,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        log_level: str | None = "warning",
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://{LOOPBACK}:{self.port}"
        if command is None:
            level = ["--log-level", log_level] if log_level else []
            cmd = [*VOXLANE, "serve", "--host", LOOPBACK, "--port", str(self.port), *level, *flags]
        else:
            cmd = [*command, "--port", str(self.port), *flags]
        self.command = cmd
        self.log_path = log_path or Path(tempfile.gettempdir()) / f"voxlane-serve-{self.port}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float = 120.0, interval_s: float = 0.2) -> float:
        """Wait until GET /health answers 200; return the seconds since the start. Raise
        :class:`ServerStartError` (with the log's end) if the process exits first or ``timeout_s`` passes."""
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"{self.name} exited with {self.proc.returncode} before it was ready ({self.log_path}):\n"
                    f"{self.log()}"
                )
            with suppress(httpx.HTTPError):
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return time.monotonic() - self.started_at
            time.sleep(interval_s)
        raise ServerStartError(
            f"{self.name} did not answer /health 200 within {timeout_s:g} s ({self.log_path}):\n{self.log()}"
        )

    @property
    def name(self) -> str:
        """The command line, short: ``voxlane serve --flag ...`` or the program's path."""
        if self.command[1:3] == ["-m", "voxlane.cli"]:
            return "voxlane " + " ".join(self.command[3:])
        return " ".join(self.command)

    def log(self, chars: int = 4000) -> str:
        """The last ``chars`` characters of the server's output."""
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> float:
        """Send ``sig``, then SIGKILL to the whole session after ``timeout_s``; return how long it took to exit."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return time.monotonic() - start


@contextmanager
def running_server(
    *flags: str,
    env: Mapping[str, str] | None = None,
    ready_timeout_s: float = 120.0,
    stop_timeout_s: float = 60.0,
    log_path: Path | None = None,
    log_level: str | None = "warning",
    command: Sequence[str] | None = None,
) -> Iterator[ServerProcess]:
    """A ready server (see :class:`ServerProcess`) for the block's duration; SIGTERM at the end."""
    srv = ServerProcess(*flags, env=env, log_path=log_path, log_level=log_level, command=command)
    try:
        srv.wait_ready(ready_timeout_s)
        yield srv
    finally:
        srv.stop(timeout_s=stop_timeout_s)
