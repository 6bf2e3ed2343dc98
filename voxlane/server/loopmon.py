"""Probes of the event loop's health, both on /metrics.

- ``LoopStallMonitor``: how late does a 5 ms sleep wake up? Any blocking call on the loop shows up as a
  stall (``voxlane_event_loop_stall_seconds``, a histogram, and its maximum).
- ``GcPauseMonitor``: how long each garbage collection ran. A collection holds the GIL, so every thread
  waits for it, the loop included (``voxlane_gc_pause_seconds`` by generation, and the maximum).

``voxlane.heap.freeze_startup_heap`` is what keeps the second small.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

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


class GcPauseMonitor:
    """Times every collection through ``gc.callbacks``. The callback runs on whichever thread triggered
    the collection, with the GIL held, and collections never overlap: plain counters are safe."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.totals_s = [0.0, 0.0, 0.0]
        self.max_s = [0.0, 0.0, 0.0]
        self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info["generation"]
        self.counts[generation] += 1
        self.totals_s[generation] += pause
        self.max_s[generation] = max(self.max_s[generation], pause)

    def render(self) -> list[str]:
        lines = ["# HELP voxlane_gc_pause_seconds Garbage collections and their time, by generation.",
                 "# TYPE voxlane_gc_pause_seconds summary"]
        for generation in range(3):
            label = f'{{generation="{generation}"}}'
            lines += [f"voxlane_gc_pause_seconds_sum{label} {self.totals_s[generation]:.6f}",
                      f"voxlane_gc_pause_seconds_count{label} {self.counts[generation]}"]
        lines.append("# TYPE voxlane_gc_pause_max_seconds gauge")
        lines += [f'voxlane_gc_pause_max_seconds{{generation="{g}"}} {self.max_s[g]:.6f}' for g in range(3)]
        lines += ["# HELP voxlane_gc_frozen_objects Objects moved out of the collector's reach after startup.",
                  "# TYPE voxlane_gc_frozen_objects gauge", f"voxlane_gc_frozen_objects {gc.get_freeze_count()}"]
        return lines

