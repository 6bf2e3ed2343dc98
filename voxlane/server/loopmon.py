"""Probes of the event loop's health, all on /metrics.

- ``LoopStallMonitor``: how late does a 5 ms sleep wake up? Any blocking call on the loop shows up as a
  stall (``voxlane_event_loop_stall_seconds``, a histogram, and its maximum).
- ``LoopWatchdog``: a thread that explains every stall of ``--loop-stall-report-ms`` or more in a warning:
  the loop thread's stack, the CPU each thread of the process used, how long the loop thread waited for
  a CPU, and how the machine's CPUs were spent. A stall during which the hypervisor took the CPUs (steal
  time) is counted apart: the machine was not running, and nothing in the process could change that.
- ``GcPauseMonitor``: how long each garbage collection ran. A collection holds the GIL, so every thread
  waits for it, the loop included (``voxlane_gc_pause_seconds`` by generation, and the maximum).

``voxlane.heap.freeze_startup_heap`` is what keeps the last small.

The monitors count in plain attributes and are prometheus-client collectors, read at scrape time: the
garbage collector's callback must take no lock (it runs inside whatever allocation triggered it, perhaps
inside a metric's own update), and the probe on the loop then costs a few additions.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.utils import floatToGoString

log = logging.getLogger("voxlane.loop")

STALL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
HOST_PAUSE_SHARE = 0.5
"""A stall is the host's when the hypervisor stole at least this share of its length in CPU time (and the
OS's, cpu_wait, when the loop thread waited for a CPU that long)."""
CAUSES = ("host_paused", "cpu_wait", "other")
"""What ``LoopWatchdog`` counts a stall as (``voxlane_event_loop_stall_reports_total{cause}``)."""


class LoopStallMonitor:
    def __init__(self, interval_s: float = 0.005, report_s: float | None = None) -> None:
        self.interval_s = interval_s
        self.report_s = report_s
        """Stalls this long or longer are handed to the watchdog (None: no watchdog)."""
        self.max_stall_s = 0.0
        self.samples = 0
        self.total_stall_s = 0.0
        self.bucket_counts = [0] * len(STALL_BUCKETS_S)
        self.last_beat = time.perf_counter()
        """When the probe last woke up (perf_counter); the watchdog reads it from its own thread."""
        self.pending: deque[tuple[float, float]] = deque(maxlen=64)
        """(start, end) of long stalls, for the watchdog to explain (deque appends are thread-safe)."""
        self.reports: Counter[str] = Counter()
        """Explained stalls by cause: 'host_paused', 'cpu_wait' or 'other' (``LoopWatchdog``)."""

    async def run(self) -> None:
        self.last_beat = time.perf_counter()
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            self.last_beat = now = time.perf_counter()
            stall_s = max(0.0, now - start - self.interval_s)
            self.record(stall_s)
            if self.report_s is not None and stall_s >= self.report_s:
                self.pending.append((start + self.interval_s, now))

    def record(self, stall_s: float) -> None:
        self.samples += 1
        self.total_stall_s += stall_s
        self.max_stall_s = max(self.max_stall_s, stall_s)
        for i, bound in enumerate(STALL_BUCKETS_S):
            if stall_s <= bound:
                self.bucket_counts[i] += 1

    def collect(self) -> Iterator[Metric]:
        buckets = [(floatToGoString(bound), count) for bound, count in zip(STALL_BUCKETS_S, self.bucket_counts)]
        yield HistogramMetricFamily(
            "voxlane_event_loop_stall_seconds",
            f"How late a {self.interval_s * 1000:g} ms sleep on the event loop woke up (event-loop lag).",
            buckets=[*buckets, ("+Inf", self.samples)],
            sum_value=self.total_stall_s,
        )
        yield GaugeMetricFamily(
            "voxlane_event_loop_stall_max_seconds", "The event loop's longest stall so far.", value=self.max_stall_s
        )
        reports = CounterMetricFamily(
            "voxlane_event_loop_stall_reports",
            "Stalls of --loop-stall-report-ms or more, by cause (host_paused: the hypervisor took the CPUs, or "
            "the loop caught up right after; "
            "cpu_wait: the loop thread was runnable but the OS gave the cores to other processes; other).",
            labels=["cause"],
        )
        for cause in CAUSES:
            reports.add_metric([cause], self.reports[cause])
        yield reports


class LoopWatchdog:
    """Explains, from its own thread, every stall the monitor hands it (``monitor.pending``), in one
    warning each. It wakes every ``threshold / 4`` (at least 5 ms) and keeps a short history of CPU
    counters (a dozen ``clock_gettime`` calls and one read of /proc/stat: tens of microseconds), so a
    stall is measured from just before it began, even when the watchdog itself was frozen with the
    loop. While a stall lasts it also samples the loop thread's stack.

    A busy loop shows its own CPU and where; a loop starved by another thread holding the GIL shows who
    had the CPU; a loop starved by the OS shows its wait for a CPU, and when that wait is at least half the
    stall it is counted as ``cpu_wait`` (the loop thread was runnable, the cores ran other processes: on a
    2-core machine, a client beside the server); a machine the hypervisor paused shows steal time, and
    such a stall is counted as ``host_paused``, and so is the stall right after it in which the loop
    catches up (``_catching_up``). The rest, the loop's own code or a thread holding the GIL, is ``other``.
    """

    def __init__(self, monitor: LoopStallMonitor, threshold_s: float, loop_thread: threading.Thread) -> None:
        self.monitor = monitor
        self.threshold_s = threshold_s
        self.loop_thread = loop_thread
        self.period_s = max(threshold_s / 4, 0.005)
        self._history: deque[_CpuSnapshot] = deque(maxlen=512)
        self._stacks: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="voxlane-loop-watchdog", daemon=True)
        self._host_pause: tuple[float, float] | None = None
        """(start, end) of the last stall counted as host_paused."""

    def start(self) -> None:
        self.monitor.report_s = self.threshold_s
        self.monitor.last_beat = time.perf_counter()
        self._history.append(_CpuSnapshot.take(self.loop_thread))
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self.monitor.report_s = None

    def _run(self) -> None:
        monitor = self.monitor
        while not self._stop.wait(self.period_s / 4 if self._stalled() else self.period_s):
            self._history.append(_CpuSnapshot.take(self.loop_thread))
            if self._stalled():
                frame = sys._current_frames().get(self.loop_thread.ident or 0)
                self._stacks["".join(traceback.format_stack(frame, limit=8)) if frame else "(no frame)"] += 1
            while monitor.pending and monitor.pending[0][1] < self._history[-1].at:
                self._report(*monitor.pending.popleft())

    def _stalled(self) -> bool:
        return time.perf_counter() - self.monitor.last_beat - self.monitor.interval_s >= self.threshold_s

    def _catching_up(self, start: float, end: float) -> bool:
        """Whether a stall is the loop catching up after a host pause: it began within a report threshold of
        the end of a stall counted as host_paused, and lasted no longer than that pause. While the hypervisor
        holds the CPUs, sockets and timers fill up; the loop then runs their callbacks back to back (seen
        on this 2-core host: a 97 ms host pause, then a 75 ms stall in which the loop thread ran 56 ms)."""
        if self._host_pause is None:
            return False
        pause_start, pause_end = self._host_pause
        return 0 <= start - pause_end <= self.threshold_s and end - start <= pause_end - pause_start

    def _report(self, start: float, end: float) -> None:
        before = next((s for s in reversed(self._history) if s.at <= start), self._history[0])
        after = next(s for s in self._history if s.at >= end)
        stolen_s = after.stolen_s(before)
        waited_s = after.loop_waited_s(before)
        caught_up = False
        if stolen_s is not None and stolen_s >= HOST_PAUSE_SHARE * (end - start):
            cause = "host_paused"
        elif waited_s is not None and waited_s >= HOST_PAUSE_SHARE * (end - start):
            cause = "cpu_wait"
        elif self._catching_up(start, end):
            cause, caught_up = "host_paused", True
        else:
            cause = "other"
        if cause == "host_paused" and not caught_up:
            self._host_pause = (start, end)
        self.monitor.reports[cause] += 1
        if self._stacks:
            where, seen = self._stacks.most_common(1)[0]
            stack = f"The loop thread was here in {seen} of {sum(self._stacks.values())} samples:\n{where.rstrip()}"
        else:
            stack = "The loop thread's stack was not sampled (the watchdog did not run during the stall)."
        self._stacks.clear()
        verdict = {
            "host_paused": "It began right after a host pause, and lasted no longer: the loop catching up on "
            "what arrived while the host was paused; cause host_paused."
            if caught_up
            else "The hypervisor did not run this machine's CPUs for most of it (steal time): cause host_paused.",
            "cpu_wait": "The loop thread was runnable but without a CPU for most of it (the OS ran other "
            "processes on the cores): cause cpu_wait.",
        }.get(cause, "Cause: other.")
        log.warning(
            "event loop blocked for %.0f ms (report threshold %.0f ms). %s Over %.0f ms around it: %s. %s",
            (end - start) * 1000,
            self.threshold_s * 1000,
            verdict,
            (after.at - before.at) * 1000,
            after.since(before),
            stack,
        )


class _CpuSnapshot:
    """CPU seconds used so far by each live Python thread (by name), the loop thread's wait for a CPU,
    and the machine's CPU time counters."""

    _TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01

    def __init__(
        self, at: float, threads: dict[str, float], machine: list[int] | None, loop_wait: float | None
    ) -> None:
        self.at = at
        self.threads = threads
        self.machine = machine
        self.loop_wait = loop_wait

    @classmethod
    def take(cls, loop_thread: threading.Thread) -> _CpuSnapshot:
        threads: dict[str, float] = {}
        for thread in threading.enumerate():
            try:
                threads[thread.name] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
            except (OSError, AttributeError):  # the thread just ended; or not Linux
                continue
        return cls(time.perf_counter(), threads, _machine_cpu(), _runqueue_wait(loop_thread))

    def stolen_s(self, earlier: _CpuSnapshot) -> float | None:
        """CPU time the hypervisor took from all of this machine's CPUs since ``earlier``."""
        if self.machine is None or earlier.machine is None:
            return None
        return (self.machine[7] - earlier.machine[7]) * self._TICK_S

    def loop_waited_s(self, earlier: _CpuSnapshot) -> float | None:
        """Seconds the loop thread spent runnable but without a CPU since ``earlier`` (schedstat)."""
        if self.loop_wait is None or earlier.loop_wait is None:
            return None
        return self.loop_wait - earlier.loop_wait

    def since(self, earlier: _CpuSnapshot) -> str:
        used = sorted(
            ((name, cpu - earlier.threads.get(name, 0.0)) for name, cpu in self.threads.items()), key=lambda kv: -kv[1]
        )
        text = "this process's threads used " + (
            ", ".join(f"{name} {cpu * 1000:.0f} ms" for name, cpu in used[:5] if cpu >= 0.0005) or "no CPU"
        )
        waited_s = self.loop_waited_s(earlier)
        if waited_s is not None:
            text += (
                f"; the loop thread waited {waited_s * 1000:.0f} ms for a CPU "
                "while runnable (the rest of its time off CPU it slept: in select, or waiting for the GIL)"
            )
        if self.machine is not None and earlier.machine is not None:
            user, nice, system, idle, iowait, irq, softirq, steal = (
                now - then for now, then in zip(self.machine, earlier.machine)
            )
            total = max(1, user + nice + system + idle + iowait + irq + softirq + steal)
            text += (
                f"; the machine's CPUs were {100 * (user + nice + system + irq + softirq) / total:.0f}% busy, "
                f"{100 * (idle + iowait) / total:.0f}% idle, {100 * steal / total:.0f}% stolen by the "
                "hypervisor"
            )
        return text


def _runqueue_wait(thread: threading.Thread) -> float | None:
    """Seconds ``thread`` has spent runnable but waiting for a CPU (Linux schedstat), or None."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _machine_cpu() -> list[int] | None:
    """user, nice, system, idle, iowait, irq, softirq, steal ticks of all CPUs (Linux /proc/stat)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
        return [int(x) for x in fields[1:9]]
    except (OSError, ValueError):
        return None


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

    def collect(self) -> Iterator[Metric]:
        pauses = SummaryMetricFamily(
            "voxlane_gc_pause_seconds", "Garbage collections and their time, by generation.", labels=["generation"]
        )
        longest = GaugeMetricFamily(
            "voxlane_gc_pause_max_seconds",
            "The longest garbage collection so far, by generation.",
            labels=["generation"],
        )
        for generation in range(3):
            pauses.add_metric([str(generation)], self.counts[generation], self.totals_s[generation])
            longest.add_metric([str(generation)], self.max_s[generation])
        yield pauses
        yield longest
        yield GaugeMetricFamily(
            "voxlane_gc_frozen_objects",
            "Objects moved out of the collector's reach after startup.",
            value=gc.get_freeze_count(),
        )
