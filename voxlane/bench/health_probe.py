"""A probe of the server's responsiveness while the load runs: GET a path (``/health``) every interval.

It runs on its own thread with its own event loop and HTTP connection, so the load generator's work
(reading bodies, parsing streams) never delays a probe: the latency measured is the server's. Probes
are sequential: one that takes longer than the interval is followed at once by the next.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

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
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, name="voxlane-bench-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> ProbeResult:
        self._stopping.set()
        self._thread.join(PROBE_TIMEOUT_S + 1.0)
        return self.result

    def _thread_main(self) -> None:
        # This thread owns its loop for its whole life; nothing else schedules work on it.
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._probe_loop())
        finally:
            loop.close()

    async def _probe_loop(self) -> None:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, limits=httpx.Limits(max_connections=1)) as client:
            next_at = time.perf_counter()
            while True:  # at least one probe, however short the run
                start = time.perf_counter()
                try:
                    response = await client.get(self.url)
                    elapsed = time.perf_counter() - start
                    if response.status_code == 200:
                        self.result.latencies_s.append(elapsed)
                    else:
                        self._fail(f"HTTP {response.status_code}: {response.text[:200]}")
                except httpx.HTTPError as exc:
                    self._fail(f"{type(exc).__name__}: {exc}")
                if self._stopping.is_set():
                    return
                next_at = max(next_at + self.interval_s, time.perf_counter())
                while not self._stopping.is_set() and time.perf_counter() < next_at:
                    await asyncio.sleep(min(0.05, max(0.0, next_at - time.perf_counter())))

    def _fail(self, error: str) -> None:
        self.result.failures += 1
        if len(self.result.first_errors) < 3:
            self.result.first_errors.append(error)
