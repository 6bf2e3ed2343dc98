"""Split long audio into windows of at most ``window_s`` seconds, cutting in silence.

Before each boundary, the last ``search_s`` seconds (the server's --split-search-s, 8 s by default)
are scanned for the quietest ``quiet_s`` stretch (RMS energy, every stride position including the one
that ends exactly on the boundary: vLLM's search skipped the last candidate) and the window is cut at
that stretch's centre. The search is wider than vLLM's 1 s on purpose: a cut inside a word makes Whisper
drop the words around it, and on the dev set's long file a 1 s search cost 5 WER points against
sequential faster-whisper, 8 s none (docs/long-audio.md). Each window keeps its true sample offset, so
timestamps stay exact; concatenating the windows gives back the input.

:class:`WindowCutter` makes the same cuts as the audio decodes, so that a window can be judged (and a
silent one dropped, :func:`is_silent`) before the rest of the file is in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SILENCE_DBFS = -65.0
"""A window whose loudest 100 ms is quieter than this (RMS, dB below full scale) is silent: it is not sent to
the engine and yields no text. Far below any speech level: on the dev set the quietest window's loudest
100 ms is -45.9 dBFS (a whisper), the -60 dBFS pink noise file's -58.5; digital silence, dither and noise
at -70 dBFS fall under it (a silent-FLAC bomb: hours of it cost nothing)."""
_SILENT_RMS = 32768.0 * 10 ** (SILENCE_DBFS / 20)  # in int16 units: 18.4
_LEVEL_FRAME = 1600  # 100 ms at 16 kHz


@dataclass(frozen=True)
class Window:
    start: int
    """First sample, in the original audio."""
    end: int
    """One past the last sample."""

    @property
    def length(self) -> int:
        return self.end - self.start


def quietest_point(samples: np.ndarray, sample_rate: int, quiet_s: float = 0.1, stride_s: float = 0.01) -> int:
    """Index (into ``samples``) of the centre of the lowest-RMS ``quiet_s`` stretch."""
    width = int(round(quiet_s * sample_rate))
    stride = max(1, int(round(stride_s * sample_rate)))
    if len(samples) <= width:
        return len(samples) // 2
    power = np.square(samples, dtype=np.float64)
    cumsum = np.concatenate(([0.0], np.cumsum(power)))
    # Start positions 0, stride, ... and the last one, len - width, so the stretch that ends on the
    # boundary is always a candidate.
    starts = np.arange(0, len(samples) - width + 1, stride)
    if starts[-1] != len(samples) - width:
        starts = np.append(starts, len(samples) - width)
    energy = cumsum[starts + width] - cumsum[starts]
    best = int(starts[int(np.argmin(energy))])
    return best + width // 2


def split_windows(
    samples: np.ndarray,
    sample_rate: int,
    window_s: float = 30.0,
    search_s: float = 8.0,
    quiet_s: float = 0.1,
) -> list[Window]:
    """Windows covering ``samples`` exactly, each at most ``window_s`` long."""
    total = len(samples)
    max_len = int(window_s * sample_rate)
    search = int(search_s * sample_rate)
    windows: list[Window] = []
    start = 0
    while total - start > max_len:
        boundary = start + max_len
        region_start = boundary - search
        cut = region_start + quietest_point(samples[region_start:boundary], sample_rate, quiet_s)
        cut = min(max(cut, start + 1), boundary)
        windows.append(Window(start, cut))
        start = cut
    windows.append(Window(start, total))
    return windows


def is_silent(pcm: np.ndarray) -> bool:
    """Whether 16 kHz int16 audio has no 100 ms louder than SILENCE_DBFS."""
    if len(pcm) == 0:
        return True
    if max(int(pcm.max()), -int(pcm.min())) <= _SILENT_RMS:  # no RMS can exceed the peak
        return True
    power = np.square(pcm, dtype=np.float64)
    starts = np.arange(0, len(pcm), _LEVEL_FRAME)
    sums = np.add.reduceat(power, starts)
    counts = np.diff(np.append(starts, len(pcm)))
    return bool(np.sqrt((sums / counts).max()) <= _SILENT_RMS)


class WindowCutter:
    """:func:`split_windows` as the audio arrives: ``feed`` blocks in order, ``finish`` at the end; each
    returns the windows cut so far, with their samples. The cuts are the same as split_windows' on the
    whole audio, and at most one window plus one block is held."""

    def __init__(self, sample_rate: int, window_s: float = 30.0, search_s: float = 8.0, quiet_s: float = 0.1):
        self.sample_rate = sample_rate
        self.quiet_s = quiet_s
        self.max_len = int(window_s * sample_rate)
        self.search = int(search_s * sample_rate)
        self.start = 0
        """Where the window being filled starts, in the whole audio."""
        self._held: list[np.ndarray] = []
        self._held_len = 0

    def feed(self, block: np.ndarray) -> list[tuple[Window, np.ndarray]]:
        self._held.append(block)
        self._held_len += len(block)
        cut: list[tuple[Window, np.ndarray]] = []
        if self._held_len <= self.max_len:
            return cut
        held = np.concatenate(self._held)
        offset = 0
        while len(held) - offset > self.max_len:  # more audio follows the boundary: cut before it
            boundary = offset + self.max_len
            region_start = boundary - self.search
            at = region_start + quietest_point(held[region_start:boundary], self.sample_rate, self.quiet_s)
            at = min(max(at, offset + 1), boundary)
            cut.append((Window(self.start, self.start + at - offset), held[offset:at]))
            self.start += at - offset
            offset = at
        rest = held[offset:]
        self._held, self._held_len = [rest], len(rest)
        return cut

    def finish(self) -> list[tuple[Window, np.ndarray]]:
        """The last window (the whole audio, when it is 30 s or less); none for no audio."""
        if self._held_len == 0:
            return []
        held = np.concatenate(self._held)
        self._held, self._held_len = [], 0
        return [(Window(self.start, self.start + len(held)), held)]
