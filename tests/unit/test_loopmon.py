"""Loop health: garbage collection pauses, the startup heap freeze, and the watchdog that says what blocked
the event loop."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from tests.conftest import metric
from voxlane.heap import freeze_startup_heap
from voxlane.server.loopmon import GcPauseMonitor, LoopStallMonitor, LoopWatchdog, _CpuSnapshot


def test_gc_monitor_times_each_collection_by_generation() -> None:
    monitor = GcPauseMonitor()
    monitor.install()
    try:
        gc.collect(0)
        gc.collect()
        gc.collect()
    finally:
        monitor.uninstall()
    gc.collect()  # after uninstall: not counted
    assert monitor.counts[0] >= 1 and monitor.counts[2] == 2
    assert 0 < monitor.max_s[2] <= monitor.totals_s[2]
    text = page(monitor)
    assert metric(text, "voxlane_gc_pause_seconds_count", generation="2") == 2
    assert metric(text, "voxlane_gc_pause_max_seconds", generation="2") == monitor.max_s[2]
    assert monitor._callback not in gc.callbacks


def test_freezing_the_startup_heap_leaves_full_collections_little_to_walk() -> None:
    class Cyclic:
        def __init__(self) -> None:
            self.me = self

    startup = [[i] for i in range(50_000)]  # long-lived objects, as imports and the app are
    try:
        frozen = freeze_startup_heap()
        assert frozen >= 50_000
        assert len(gc.get_objects()) < frozen / 10  # the collector no longer walks them
        Cyclic()  # garbage made after the freeze is still collected
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
    assert len(startup) == 50_000


def test_watchdog_reports_a_blocked_loop_with_where_it_was(caplog) -> None:
    monitor = LoopStallMonitor()

    def block_the_loop_for_a_while() -> None:  # busy, as a heavy call inline in async def would be
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:
            pass

    async def scenario() -> None:
        probe = asyncio.create_task(monitor.run())
        watchdog = LoopWatchdog(monitor, 0.04, threading.current_thread())
        watchdog.start()
        await asyncio.sleep(0.1)  # the scenario: 0.1 s of a loop that is well, which must give no report
        assert not monitor.reports
        block_the_loop_for_a_while()
        async with asyncio.timeout(5):
            while not monitor.reports:  # the monitor reports the stall once the loop runs again
                await asyncio.sleep(0.01)
        watchdog.stop()
        probe.cancel()

    with caplog.at_level(logging.WARNING, logger="voxlane.loop"):
        asyncio.run(scenario())
    assert monitor.reports == {"other": 1}
    [record] = caplog.records
    assert "event loop blocked for 1" in record.message  # 150 ms, give or take
    assert "block_the_loop_for_a_while" in record.message
    main_cpu_ms = int(re.search(r"MainThread (\d+) ms", record.message).group(1))
    assert main_cpu_ms >= 50  # the loop thread itself was busy, and the report says so
    text = page(monitor)
    assert metric(text, "voxlane_event_loop_stall_reports_total", cause="other") == 1
    assert metric(text, "voxlane_event_loop_stall_reports_total", cause="host_paused") == 0
    assert metric(text, "voxlane_event_loop_stall_seconds_count") == monitor.samples > 0
    assert metric(text, "voxlane_event_loop_stall_max_seconds") >= 0.1


def test_a_stall_while_the_hypervisor_held_the_cpus_is_counted_as_the_hosts(caplog) -> None:
    """/proc/stat's 8th column is steal time: CPU time the hypervisor gave to someone else."""
    monitor = LoopStallMonitor()
    watchdog = LoopWatchdog(monitor, 0.05, threading.current_thread())
    tick = _CpuSnapshot._TICK_S

    def snapshot(at: float, steal_ticks: int, busy_ticks: int) -> _CpuSnapshot:
        return _CpuSnapshot(at, {"MainThread": 0.0}, [busy_ticks, 0, 0, 0, 0, 0, 0, steal_ticks], 0.0)

    ticks_in_100_ms = round(0.1 / tick)
    watchdog._history.extend([snapshot(10.0, 0, 0), snapshot(10.2, ticks_in_100_ms, ticks_in_100_ms)])
    with caplog.at_level(logging.WARNING, logger="voxlane.loop"):
        watchdog._report(10.05, 10.15)  # 100 ms, and one CPU was stolen for 100 ms of it
    assert monitor.reports == {"host_paused": 1}
    assert "cause host_paused" in caplog.records[-1].message

    watchdog._history.append(snapshot(10.4, ticks_in_100_ms + round(0.02 / tick), 2 * ticks_in_100_ms))
    watchdog._report(10.25, 10.35)  # 100 ms with 20 ms stolen: not the host's doing
    assert monitor.reports == {"host_paused": 1, "other": 1}


def test_the_loop_catching_up_right_after_a_host_pause_is_the_hosts(caplog) -> None:
    """After a host pause the loop runs what piled up meanwhile: a stall that begins within a report threshold
    of the pause's end, and lasts no longer than the pause, is the host's too. Later or longer ones are not."""
    monitor = LoopStallMonitor()
    watchdog = LoopWatchdog(monitor, 0.05, threading.current_thread())
    tick = _CpuSnapshot._TICK_S
    ticks_in_100_ms = round(0.1 / tick)

    def snapshot(at: float, steal_ticks: int) -> _CpuSnapshot:
        return _CpuSnapshot(at, {"MainThread": 0.0}, [0, 0, 0, 0, 0, 0, 0, steal_ticks], 0.0)

    watchdog._history.extend([snapshot(10.0, 0), snapshot(10.152, ticks_in_100_ms), snapshot(10.24, ticks_in_100_ms)])
    watchdog._report(10.05, 10.15)  # a 100 ms host pause
    watchdog._history.append(snapshot(10.5, ticks_in_100_ms))
    with caplog.at_level(logging.WARNING, logger="voxlane.loop"):
        watchdog._report(10.155, 10.23)  # 75 ms, nothing stolen, 5 ms after the pause
    assert monitor.reports == {"host_paused": 2}
    assert "catching up" in caplog.records[-1].message
    watchdog._report(10.30, 10.35)  # 150 ms after the pause: the loop's own
    assert monitor.reports == {"host_paused": 2, "other": 1}

    watchdog._history.extend([snapshot(11.0, ticks_in_100_ms), snapshot(11.152, 2 * ticks_in_100_ms)])
    watchdog._report(11.05, 11.15)  # another 100 ms host pause
    watchdog._history.append(snapshot(11.4, 2 * ticks_in_100_ms))
    watchdog._report(11.16, 11.36)  # right after it, but 200 ms: longer than the pause
    assert monitor.reports == {"host_paused": 3, "other": 2}


def test_a_stall_the_loop_thread_spent_waiting_for_a_core_is_counted_apart(caplog) -> None:
    """schedstat's second field: time the loop thread was runnable without a CPU. Half the stall or more is
    the OS's doing (cpu_wait); less is counted with the loop's own stalls."""
    monitor = LoopStallMonitor()
    watchdog = LoopWatchdog(monitor, 0.05, threading.current_thread())

    def snapshot(at: float, loop_wait: float) -> _CpuSnapshot:
        return _CpuSnapshot(at, {"MainThread": 0.0}, [0] * 8, loop_wait)

    watchdog._history.extend([snapshot(10.0, 1.0), snapshot(10.2, 1.06)])
    with caplog.at_level(logging.WARNING, logger="voxlane.loop"):
        watchdog._report(10.05, 10.15)  # 100 ms, 60 of them runnable without a CPU
    assert monitor.reports == {"cpu_wait": 1}
    assert "cause cpu_wait" in caplog.records[-1].message
    assert "waited 60 ms for a CPU" in caplog.records[-1].message

    watchdog._history.append(snapshot(10.4, 1.10))
    watchdog._report(10.25, 10.35)  # 100 ms, 40 of them waiting: the loop (or the GIL) had the rest
    assert monitor.reports == {"cpu_wait": 1, "other": 1}
    text = page(monitor)
    assert metric(text, "voxlane_event_loop_stall_reports_total", cause="cpu_wait") == 1


def page(monitor: LoopStallMonitor | GcPauseMonitor) -> str:
    """The monitor's part of /metrics, as Prometheus reads it."""
    registry = CollectorRegistry()
    registry.register(monitor)
    return generate_latest(registry).decode()
