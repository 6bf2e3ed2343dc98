"""The engine's counters for /metrics: recorded per batch, sent whole as one EngineStats message."""

from __future__ import annotations

import time

from tests.engine.test_core import FEATURES, make_core, msg, run_until_idle
from voxlane.engine.stats import StatsRecorder
from voxlane.messages import EngineStats, decode_output, encode_output
from voxlane.runners.fake import FakeRunner


def test_batches_are_counted_by_size_and_time() -> None:
    core = make_core(FakeRunner(delay_s=0.01))  # batches of at most 4
    before = core.stats()
    assert before.batch_size.count == 0 and before.waiting_windows == 0
    for i in range(6):
        core.add_window(msg("a", i, 6), FEATURES, time.monotonic())
    assert core.stats().waiting_windows == 6
    run_until_idle(core)
    stats = core.stats()
    assert stats.waiting_windows == 0 and stats.running_batches == 0
    assert stats.batch_size.total == 6  # every window ran in exactly one batch
    assert stats.batch_size.count == stats.batch_seconds.count >= 2
    assert stats.batch_seconds.total >= 0.01 * stats.batch_seconds.count
    assert before.batch_size.count == 0  # a snapshot is a copy: later batches leave it as it was


def test_buckets_are_cumulative_with_inclusive_bounds() -> None:
    recorder = StatsRecorder()
    for size in (1, 4, 5, 100):
        recorder.batch(size, 0.3)
    hist = recorder.snapshot(0, 0, 0).batch_size
    by_bound = dict(zip(hist.bounds, hist.buckets))
    assert (by_bound[1], by_bound[4], by_bound[6], by_bound[64]) == (1, 2, 3, 3)  # 100 is only in +Inf
    assert hist.count == 4 and hist.total == 110


def test_stats_cross_the_socket_intact() -> None:
    stats = StatsRecorder().snapshot(3, 2, 1)
    decoded, pcm = decode_output(encode_output(stats))
    assert isinstance(decoded, EngineStats) and pcm is None
    assert decoded == stats
