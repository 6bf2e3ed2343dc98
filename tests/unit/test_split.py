from __future__ import annotations

import itertools

import numpy as np
import pytest

from voxlane.audio.split import quietest_point, split_windows

SR = 16000


def speech_with_gaps(total_s: float, gaps_s: list[float], seed: int = 0) -> np.ndarray:
    """Loud noise everywhere except 150 ms of near-silence starting at each of ``gaps_s``."""
    rng = np.random.default_rng(seed)
    audio = (rng.standard_normal(int(total_s * SR)) * 0.3).astype(np.float32)
    for gap in gaps_s:
        start = int(gap * SR)
        audio[start : start + int(0.15 * SR)] *= 0.001
    return audio


def test_short_audio_is_one_window() -> None:
    audio = speech_with_gaps(12.0, [])
    windows = split_windows(audio, SR)
    assert [(w.start, w.end) for w in windows] == [(0, len(audio))]


def test_cuts_land_in_the_silence_before_each_boundary() -> None:
    # Gaps in the last second before 30 s and before the next boundary (relative to the first cut).
    audio = speech_with_gaps(75.0, [29.3, 58.9])
    windows = split_windows(audio, SR)
    assert len(windows) == 3
    first_cut = windows[0].end / SR
    assert 29.3 <= first_cut <= 29.45
    second_cut = windows[1].end / SR
    assert 58.9 <= second_cut <= 59.05


def test_quiet_stretch_at_the_very_end_of_the_search_region_is_found() -> None:
    # The only silence is the last 100 ms before the boundary: the last candidate must be evaluated.
    audio = speech_with_gaps(40.0, [])
    audio[int(29.9 * SR) : int(30.0 * SR)] = 0.0
    windows = split_windows(audio, SR)
    assert 29.9 * SR <= windows[0].end <= 30.0 * SR


def test_last_candidate_when_stride_does_not_divide_the_region() -> None:
    samples = np.ones(1234, dtype=np.float32)
    samples[-100:] = 0.0
    assert quietest_point(samples, 1000, quiet_s=0.1, stride_s=0.03) == 1234 - 50


@pytest.mark.parametrize("total_s", [30.0, 30.01, 61.7, 300.0, 3600.5])
def test_windows_are_at_most_30_s_and_lossless(total_s: float) -> None:
    audio = speech_with_gaps(total_s, [], seed=int(total_s))
    windows = split_windows(audio, SR)
    assert all(0 < w.length <= 30 * SR for w in windows)
    assert windows[0].start == 0 and windows[-1].end == len(audio)
    assert all(a.end == b.start for a, b in itertools.pairwise(windows))
    rebuilt = np.concatenate([audio[w.start : w.end] for w in windows])
    assert np.array_equal(rebuilt, audio)
