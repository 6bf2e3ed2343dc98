"""The benchmark's figures, as pure functions of recorded timings. Exact definitions: docs/benchmarks.md.

Nothing here does I/O or reads a clock, so every figure is tested on constructed timings.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LATENCY_PERCENTILES = (50, 90, 95, 99)


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile with linear interpolation between closest ranks (numpy's default);
    NaN for no values."""
    if not values:
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=float), p))


def latency_stats(values_s: Sequence[float]) -> dict[str, float]:
    """mean, median, std (population), p90, p95, p99 and max of latencies given in seconds, in milliseconds."""
    if not values_s:
        return {k: math.nan for k in ("mean", "median", "std", "p50", "p90", "p95", "p99", "max")}
    arr = np.asarray(values_s, dtype=float) * 1000.0
    out = {"mean": float(arr.mean()), "median": float(np.median(arr)), "std": float(arr.std()), "max": float(arr.max())}
    for p in LATENCY_PERCENTILES:
        out[f"p{p}"] = float(np.percentile(arr, p))
    return out


def rtfx(audio_s: float, wall_s: float) -> float:
    """Inverse real-time factor of a run: seconds of audio transcribed per second of wall time."""
    return audio_s / wall_s if wall_s > 0 else math.nan


def inter_chunk_s(arrivals_s: Sequence[float]) -> list[float]:
    """Gaps between consecutive chunk arrivals of one stream."""
    return [b - a for a, b in itertools.pairwise(arrivals_s)]


@dataclass(frozen=True)
class Continuity:
    """What a listener of one stream would hear: the stalls of a player fed by the received chunks."""

    underruns: int
    """Times the player ran out of audio before the next chunk arrived."""
    total_stall_s: float
    max_stall_s: float


def simulate_playback(chunks: Sequence[tuple[float, float]]) -> Continuity:
    """Play ``(arrival_s, audio_s)`` chunks, in arrival order, in real time from the first chunk's arrival.

    The player's buffer runs dry at ``play_end``; a chunk arriving after that is an underrun whose stall
    is ``arrival - play_end``, and playback resumes at the arrival. Chunks holding no audio are ignored.
    """
    underruns, total, worst = 0, 0.0, 0.0
    play_end: float | None = None
    for arrival, audio_s in chunks:
        if audio_s <= 0:
            continue
        if play_end is None:
            play_end = arrival + audio_s
            continue
        if arrival > play_end:
            stall = arrival - play_end
            underruns += 1
            total += stall
            worst = max(worst, stall)
            play_end = arrival + audio_s
        else:
            play_end += audio_s
    return Continuity(underruns, total, worst)
