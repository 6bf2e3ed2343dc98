"""audio/gaps.py: a break is the gap between two sounds, whatever quiet the units bring at their edges."""

from __future__ import annotations

import numpy as np
import pytest

from voxlane.audio.gaps import HEAD_ROOM_S, BreakGaps, quiet_head, quiet_tail

RATE = 22050
FRAME = RATE // 100


def unit(head_s: float, voiced_s: float, tail_s: float) -> np.ndarray:
    """Quiet (a faint hiss), a loud tone, quiet: like a synthesised unit's edges."""
    rng = np.random.default_rng(0)
    n_head, n_voiced, n_tail = (round(s * RATE) for s in (head_s, voiced_s, tail_s))
    tone = 12000 * np.sin(2 * np.pi * 220 * np.arange(n_voiced) / RATE)
    hiss = rng.normal(0, 30, n_head + n_voiced + n_tail)
    return (np.concatenate([np.zeros(n_head), tone, np.zeros(n_tail)]) + hiss).astype(np.int16)


def gap_s(pcm: np.ndarray) -> float:
    """The longest quiet run between loud 10 ms frames, as the e2e test measures it."""
    frames = pcm[: len(pcm) // FRAME * FRAME].astype(np.float64).reshape(-1, FRAME)
    loud = np.flatnonzero(np.sqrt(np.mean(frames**2, axis=1)) >= 0.01 * 32767)
    return float((np.diff(loud) - 1).max()) / 100


def test_quiet_edges_are_measured_in_whole_frames() -> None:
    pcm = unit(0.12, 0.5, 0.2)
    assert abs(quiet_head(pcm, RATE) - 0.12 * RATE) <= FRAME
    assert abs(quiet_tail(pcm, RATE) - 0.2 * RATE) <= FRAME
    silent = np.zeros(RATE // 2, dtype=np.int16)
    assert quiet_head(silent, RATE) == quiet_tail(silent, RATE) == len(silent)


@pytest.mark.parametrize("break_s", [0.05, 0.2, 0.3, 1.0, 3.0])
def test_the_gap_between_two_units_is_the_break(break_s: float) -> None:
    """0.15 s of quiet at the end of one unit and 0.1 s at the start of the next: a longer break fills the
    rest with zeros, a shorter one cuts into the quiet edges (never into the sound)."""
    gaps = BreakGaps(RATE)
    first, second = unit(0.05, 0.4, 0.15), unit(0.1, 0.4, 0.05)
    out = np.concatenate([gaps.feed(first, break_s), gaps.feed(second, 0.0), gaps.finish()])
    assert gap_s(out) == pytest.approx(break_s, abs=0.02)
    assert np.count_nonzero(np.abs(out) > 5000) == np.count_nonzero(np.abs(first) > 5000) + np.count_nonzero(
        np.abs(second) > 5000
    )


def test_unit_start_places_the_units_own_times_in_the_stream() -> None:
    gaps = BreakGaps(RATE)
    first, second = unit(0.05, 0.4, 0.15), unit(0.1, 0.4, 0.05)
    sent = len(gaps.feed(first, 1.0))
    out = gaps.feed(second, 0.0)
    sound = round(0.1 * RATE)  # where the second unit's tone starts within it
    assert abs(gaps.unit_start + sound - (sent + len(out) - len(second) + sound)) <= 1
    assert abs((gaps.unit_start + sound) / RATE - (0.45 + 1.0)) <= 0.02


def test_a_break_after_the_last_unit_is_quiet_of_its_length_after_the_last_sound() -> None:
    gaps = BreakGaps(RATE)
    pcm = unit(0.05, 0.4, 0.15)
    out = np.concatenate([gaps.feed(pcm, 2.0), gaps.finish()])
    assert len(out) / RATE == pytest.approx(0.05 + 0.4 + 2.0, abs=0.02)  # the tone ends 0.45 s in
    assert gaps.finish().size == 0


def test_units_without_a_break_pass_through_untouched() -> None:
    gaps = BreakGaps(RATE)
    pcm = unit(0.05, 0.4, 0.15)
    assert np.array_equal(gaps.feed(pcm, 0.0), pcm)
    assert gaps.finish().size == 0


def test_a_long_breaks_silence_is_sent_with_the_unit_before_it() -> None:
    """A player gets the silence of a 3 s break with the unit before it, not once the next unit is made:
    all but HEAD_ROOM_S (kept for the next unit's quiet start) comes out of the first feed."""
    gaps = BreakGaps(RATE)
    first = unit(0.05, 0.4, 0.15)
    sent = gaps.feed(first, 3.0)
    assert len(sent) / RATE == pytest.approx(0.6 + 3.0 - 0.15 - HEAD_ROOM_S, abs=0.02)
    out = np.concatenate([sent, gaps.feed(unit(0.1, 0.4, 0.05), 0.0)])
    assert gap_s(out) == pytest.approx(3.0, abs=0.02)
