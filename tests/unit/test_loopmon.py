"""The two loop-health probes behind /metrics: garbage collection pauses, and the startup heap freeze."""

from __future__ import annotations

import gc
import re

from voxlane.heap import freeze_startup_heap
from voxlane.server.loopmon import GcPauseMonitor


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
    text = "\n".join(monitor.render())
    assert re.search(r'^voxlane_gc_pause_seconds_count\{generation="2"\} 2$', text, re.M)
    assert re.search(r'^voxlane_gc_pause_max_seconds\{generation="2"\} 0\.\d+$', text, re.M)
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
