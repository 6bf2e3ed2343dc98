"""Resampling with soxr, one cached resampler per (source rate, target rate) in a bounded LRU.

Users choose the source rate (any file's header), so the cache must be bounded: an unbounded dict
keyed by rate is a memory leak that a client can drive.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import soxr

MAX_CACHED_RESAMPLERS = 16


class _Entry:
    __slots__ = ("lock", "stream")

    def __init__(self, stream: soxr.ResampleStream) -> None:
        self.stream = stream
        self.lock = threading.Lock()


class ResamplerCache:
    """Bounded LRU of soxr streams. Thread-safe: a stream busy in another thread is not waited for,
    the caller gets a fresh, uncached one instead."""

    def __init__(self, max_entries: int = MAX_CACHED_RESAMPLERS) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, int], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._entries)

    def _get(self, key: tuple[int, int]) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = _Entry(soxr.ResampleStream(key[0], key[1], 1, dtype="float32", quality="HQ"))
                self._entries[key] = entry
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
            return entry

    @contextmanager
    def stream(self, source_rate: int, target_rate: int) -> Iterator[Callable[[np.ndarray, bool], np.ndarray]]:
        """A resampler for one stream of chunks: ``resample(chunk, last)`` (mono float32), ``last=True`` on the
        final chunk. The chunks' outputs concatenate to what :meth:`resample` gives for the whole signal."""
        if source_rate == target_rate:
            yield lambda chunk, last: chunk
            return
        entry = self._get((source_rate, target_rate))
        if not entry.lock.acquire(blocking=False):
            yield soxr.ResampleStream(source_rate, target_rate, 1, dtype="float32", quality="HQ").resample_chunk
            return
        try:
            yield entry.stream.resample_chunk
        finally:
            entry.stream.clear()
            entry.lock.release()

    def resample(self, samples: np.ndarray, source_rate: int, target_rate: int) -> np.ndarray:
        """Mono float32 in, mono float32 out."""
        if source_rate == target_rate:
            return samples
        samples = np.ascontiguousarray(samples, dtype=np.float32)
        entry = self._get((source_rate, target_rate))
        if not entry.lock.acquire(blocking=False):
            return soxr.resample(samples, source_rate, target_rate, quality="HQ").astype(np.float32, copy=False)
        try:
            out = entry.stream.resample_chunk(samples, last=True)
            entry.stream.clear()
        finally:
            entry.lock.release()
        return np.asarray(out, dtype=np.float32)


resamplers = ResamplerCache()
