"""A probe of the server's responsiveness while the load runs: GET a path (``/health``) every interval.

It runs in a process of its own, with its own event loop and HTTP connection: a thread of the load
generator's process would wait for that process's GIL while the generator encodes uploads and parses
answers (at 64 clients of long audio the generator's own work put 7 ms on the probe's p99), and that wait
is not the server's. Probes are sequential: one that takes longer than the interval is followed at once
by the next. ``stop()`` hands the process's results back over a pipe.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

import httpx

PROBE_TIMEOUT_S = 5.0


@dataclass
class ProbeResult:
    latencies_s: list[float] = field(default_factory=list)
    """Latency of each successful probe (status 200)."""
    failures: int = 0
    first_errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.latencies_s) + self.failures


class HealthProbe:
    """``start()`` before the load, ``stop()`` after it; ``result`` holds what was seen."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url = url
        self.interval_s = interval_s
        self.result = ProbeResult()
        ctx = multiprocessing.get_context("spawn")  # no copy of the generator's loop, threads or sockets
        self._conn, child_conn = ctx.Pipe()
        self._process = ctx.Process(
            target=_probe_main, args=(url, interval_s, child_conn), name="voxlane-bench-probe", daemon=True
        )

    def start(self) -> None:
        """Start probing; returns once the probe process is up, so that the load never starts unprobed."""
        self._process.start()
        self._conn.recv()  # "started"

    def stop(self) -> ProbeResult:
        self._conn.send("stop")
        if self._conn.poll(PROBE_TIMEOUT_S + 5.0):
            latencies, failures, errors = self._conn.recv()
            self.result = ProbeResult(latencies, failures, errors)
        self._process.join(5.0)
        if self._process.is_alive():
            self._process.kill()
        return self.result


def _probe_main(url: str, interval_s: float, conn: Connection) -> None:
    result = ProbeResult()
    asyncio.run(_probe_loop(url, interval_s, conn, result))
    conn.send((result.latencies_s, result.failures, result.first_errors))


async def _probe_loop(url: str, interval_s: float, conn: Connection, result: ProbeResult) -> None:
    conn.send("started")
    async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, limits=httpx.Limits(max_connections=1)) as client:
        next_at = time.perf_counter()
        while True:  # at least one probe, however short the run
            start = time.perf_counter()
            try:
                response = await client.get(url)
                elapsed = time.perf_counter() - start
                if response.status_code == 200:
                    result.latencies_s.append(elapsed)
                else:
                    _fail(result, f"HTTP {response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as exc:
                _fail(result, f"{type(exc).__name__}: {exc}")
            if conn.poll():
                return
            next_at = max(next_at + interval_s, time.perf_counter())
            while not conn.poll() and time.perf_counter() < next_at:
                await asyncio.sleep(min(0.05, max(0.0, next_at - time.perf_counter())))


def _fail(result: ProbeResult, error: str) -> None:
    result.failures += 1
    if len(result.first_errors) < 3:
        result.first_errors.append(error)
