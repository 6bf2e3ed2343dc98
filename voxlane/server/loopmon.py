"""A probe of the event loop's health: how late does a 5 ms sleep wake up?

Any blocking call on the loop shows up here as a stall. Exposed on /metrics as a histogram
(``voxlane_event_loop_stall_seconds``) and a maximum, so tests and operators can see it under load.
"""

from __future__ import annotations

import asyncio
import time

STALL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class LoopStallMonitor:
    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.max_stall_s = 0.0
        self.samples = 0
        self.total_stall_s = 0.0
        self.bucket_counts = [0] * len(STALL_BUCKETS_S)

    async def run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            self.record(max(0.0, time.perf_counter() - start - self.interval_s))

    def record(self, stall_s: float) -> None:
        self.samples += 1
        self.total_stall_s += stall_s
        self.max_stall_s = max(self.max_stall_s, stall_s)
        for i, bound in enumerate(STALL_BUCKETS_S):
            if stall_s <= bound:
                self.bucket_counts[i] += 1

    def render(self) -> list[str]:
        name = "voxlane_event_loop_stall_seconds"
        lines = [f"# HELP {name} How late a {self.interval_s * 1000:g} ms sleep on the event loop woke up.",
                 f"# TYPE {name} histogram"]
        for bound, count in zip(STALL_BUCKETS_S, self.bucket_counts):
            lines.append(f'{name}_bucket{{le="{bound}"}} {count}')
        lines += [f'{name}_bucket{{le="+Inf"}} {self.samples}', f"{name}_sum {self.total_stall_s:.6f}",
                  f"{name}_count {self.samples}",
                  "# TYPE voxlane_event_loop_stall_max_seconds gauge",
                  f"voxlane_event_loop_stall_max_seconds {self.max_stall_s:.6f}"]
        return lines
