"""SSML breaks as the gap a listener hears: from the last sound before the break to the first after it.

A unit of speech starts and ends with some quiet of the voice's own (about 0.1-0.2 s at each end with the
bundled voice), so zeros of the break's length added after a unit make a gap of the break plus that quiet
(1.73-1.75 s for a 1.5 s break). ``BreakGaps`` holds back the quiet at the end of a unit with a break after
it, measures the quiet at the start of the next unit, and puts between the two sounds exactly the break:
the quiet of both edges and zeros for what is missing, or, when the break is shorter than the two edges'
quiet together, only part of that quiet (cut where it is quiet, with a short fade), so a short break is
shorter than a plain sentence boundary. A break after the last unit is quiet of the break's length after
the last sound.

Quiet is measured by 10 ms frames from each edge inwards, up to ``SCAN_S`` of them: a frame whose RMS is
below ``QUIET_RMS`` of full scale (-40 dBFS) is quiet. The scan goes 16 frames at a time and stops at the
first loud frame, so it reads a few thousand samples of a unit: 0.35-0.45 ms for a unit's tail on the two
cores under a load of 11, so it runs on the event loop (as the zeros added after a unit did).
"""

from __future__ import annotations

import numpy as np

QUIET_RMS = 0.01
"""A 10 ms frame with an RMS below this fraction of full scale (-40 dBFS) is quiet."""
FRAME_S = 0.01
SCAN_S = 2.0
"""How far into a unit from each edge quiet is looked for; a longer stretch counts as this long."""
_STEP_FRAMES = 16
FADE_S = 0.005
"""Fade at a cut made inside a unit's quiet edge, so the cut does not click."""
HEAD_ROOM_S = 0.3
"""Of a long break, the part kept back for the next unit's quiet start (0.07-0.1 s with the bundled voice);
the rest is sent with the unit before the break, so a player has it while the next unit is synthesised."""


def _full_scale(pcm: np.ndarray) -> float:
    return float(np.iinfo(pcm.dtype).max) if np.issubdtype(pcm.dtype, np.integer) else 1.0


def quiet_head(pcm: np.ndarray, sample_rate: int) -> int:
    """Samples of quiet at the start of ``pcm`` (whole frames; all of it when nothing is loud)."""
    return _quiet_run(pcm, sample_rate, from_end=False)


def quiet_tail(pcm: np.ndarray, sample_rate: int) -> int:
    """Samples of quiet at the end of ``pcm`` (whole frames; all of it when nothing is loud)."""
    return _quiet_run(pcm, sample_rate, from_end=True)


def _quiet_run(pcm: np.ndarray, sample_rate: int, from_end: bool) -> int:
    frame = max(1, round(FRAME_S * sample_rate))
    frames = min(len(pcm) // frame, round(SCAN_S / FRAME_S))
    threshold = QUIET_RMS * _full_scale(pcm)
    for first in range(0, frames, _STEP_FRAMES):  # a step at a time from the edge: the quiet is usually short
        count = min(_STEP_FRAMES, frames - first)
        start, stop = first * frame, (first + count) * frame
        edge = pcm[len(pcm) - stop : len(pcm) - start][::-1] if from_end else pcm[start:stop]
        blocks = edge.astype(np.float32).reshape(count, frame)
        loud = np.sqrt(np.mean(blocks * blocks, axis=1)) >= threshold
        if loud.any():
            return start + int(np.argmax(loud)) * frame
    return len(pcm) if frames * frame >= len(pcm) - frame else frames * frame


def longest_quiet_s(pcm: np.ndarray, sample_rate: int) -> float:
    """The longest run of quiet 10 ms frames between two loud ones: the gap a listener hears at a break."""
    frame = max(1, round(FRAME_S * sample_rate))
    blocks = pcm[: len(pcm) // frame * frame].astype(np.float64).reshape(-1, frame)
    loud = np.flatnonzero(np.sqrt(np.mean(blocks * blocks, axis=1)) >= QUIET_RMS * _full_scale(pcm))
    gaps = np.diff(loud) - 1  # quiet frames between each two loud ones
    return float(gaps.max()) * FRAME_S if gaps.size else 0.0


def _fade(pcm: np.ndarray, sample_rate: int, out: bool) -> np.ndarray:
    n = min(len(pcm), max(1, round(FADE_S * sample_rate)))
    ramp = np.linspace(1.0, 0.0, n) if out else np.linspace(0.0, 1.0, n)
    faded = pcm.copy()
    if out:
        faded[len(pcm) - n :] = (pcm[len(pcm) - n :] * ramp).astype(pcm.dtype)
    else:
        faded[:n] = (pcm[:n] * ramp).astype(pcm.dtype)
    return faded


class BreakGaps:
    """One stream's units in, the audio to encode out, each break the gap it asks for.

    ``feed`` each unit's PCM in order with the pause asked after it; it returns what can be sent now (a unit
    followed by a short break keeps its quiet end back until the next unit shows its quiet start; one followed
    by a long break comes with the break's silence but ``HEAD_ROOM_S``). ``finish``
    returns what is held at the end of the stream. ``unit_start`` is where the last fed unit's first sample
    sits in the stream (samples), counting samples cut from its quiet start as if they were there, so a time
    within the unit plus ``unit_start`` is its time in the stream.
    """

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._held = np.zeros(0, dtype=np.int16)
        self._gap: int | None = None
        self.sent = 0
        """Samples returned so far."""
        self.unit_start = 0

    def feed(self, pcm: np.ndarray, pause_s: float) -> np.ndarray:
        self.unit_start = self.sent
        out = self._close_gap(pcm) if self._gap is not None else pcm
        if pause_s > 0:
            gap, tail = round(pause_s * self.sample_rate), quiet_tail(out, self.sample_rate)
            early = gap - tail - round(HEAD_ROOM_S * self.sample_rate)
            if early > 0:  # a long break: its silence goes out now, the player's buffer while the next unit is made
                out = np.concatenate([out, np.zeros(early, dtype=out.dtype)])
                self._held, self._gap = np.zeros(0, dtype=out.dtype), gap - tail - early
            else:
                self._held, out = out[len(out) - tail :], out[: len(out) - tail]
                self._gap = gap
        self.sent += len(out)
        return out

    def finish(self) -> np.ndarray:
        if self._gap is None:
            return np.zeros(0, dtype=self._held.dtype)
        held, gap = self._held, self._gap
        self._gap, self._held = None, np.zeros(0, dtype=held.dtype)
        out = _fade(held[:gap], self.sample_rate, out=True) if len(held) > gap else held
        out = np.concatenate([out, np.zeros(max(0, gap - len(held)), dtype=held.dtype)])
        self.sent += len(out)
        return out

    def _close_gap(self, pcm: np.ndarray) -> np.ndarray:
        """The held quiet, zeros or cuts, and ``pcm``: the gap between their sounds is the one asked."""
        assert self._gap is not None
        held, gap = self._held, self._gap
        self._gap, self._held = None, np.zeros(0, dtype=held.dtype)
        head = quiet_head(pcm, self.sample_rate)
        if len(held) + head <= gap:
            self.unit_start = self.sent + gap - head
            return np.concatenate([held, np.zeros(gap - len(held) - head, dtype=pcm.dtype), pcm])
        # Not enough room for both quiet edges: keep up to half the gap of each, the rest from the other.
        keep_head = min(head, gap // 2)
        keep_tail = min(len(held), gap - keep_head)
        keep_head = min(head, gap - keep_tail)
        before = _fade(held[:keep_tail], self.sample_rate, out=True) if keep_tail < len(held) else held
        after = _fade(pcm[head - keep_head :], self.sample_rate, out=False) if keep_head < head else pcm
        self.unit_start = self.sent + keep_tail + keep_head - head
        return np.concatenate([before, after])
