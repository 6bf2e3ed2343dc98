"""The engine's own counters for /metrics: kept here, cumulative, and sent whole as one ``EngineStats``
about once a second (proc.py), so that measuring costs the engine a few additions per batch, never a
message per window."""

from __future__ import annotations

import bisect
import os
import threading

from voxlane.messages import EngineStats, Histogram

BATCH_SIZE_BOUNDS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)
BATCH_SECONDS_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class StatsRecorder:
    """Batches are recorded on the worker threads that ran them, snapshots taken on the loop thread: one
    lock, held for a few additions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch_size = _empty(BATCH_SIZE_BOUNDS)
        self._batch_seconds = _empty(BATCH_SECONDS_BOUNDS)

    def batch(self, size: int, seconds: float) -> None:
        with self._lock:
            _observe(self._batch_size, size)
            _observe(self._batch_seconds, seconds)

    def snapshot(self, waiting_windows: int, waiting_speech_units: int, running_batches: int) -> EngineStats:
        with self._lock:
            return EngineStats(
                pid=os.getpid(),
                waiting_windows=waiting_windows,
                waiting_speech_units=waiting_speech_units,
                running_batches=running_batches,
                batch_size=_copy(self._batch_size),
                batch_seconds=_copy(self._batch_seconds),
            )


def _empty(bounds: tuple[float, ...]) -> Histogram:
    return Histogram(list(bounds), [0] * len(bounds))


def _observe(histogram: Histogram, value: float) -> None:
    for i in range(bisect.bisect_left(histogram.bounds, value), len(histogram.bounds)):
        histogram.buckets[i] += 1
    histogram.count += 1
    histogram.total += value


def _copy(histogram: Histogram) -> Histogram:
    return Histogram(list(histogram.bounds), list(histogram.buckets), histogram.count, histogram.total)
