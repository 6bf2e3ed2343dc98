"""Short windows that share one encoder pass (``--pack-short-s``), each still decoded on its own.

Whisper encodes every window as 30 s: a 3 s clip pays for 27 s of silence. When a batch holds several short
windows, their log-mel frames go into one 30 s window, one after the other with a second of silence between
them, and the encoder runs once for all of them. Each window is then decoded from an encoder output of its
own: the pack's output over its own frames (and a fifth of a second either side), and everywhere else the
encoder's output for silence (one pass per noise floor, cached). The decoder's cross-attention reads nothing
of another window's audio, so a window's text is its own (docs/asr-engine.md, third round). The decode is
without timestamp tokens: the window's audio starts where the pack put it, not at 0 s, and Whisper's first
timestamp may not be later than 1 s. A packed window is one segment, its whole audio.

How the encoder mixes the windows of a pack (its self-attention spans the 30 s) was measured, not reasoned
about: on the dev set's pieces of at most 12 s, packed decodes read within the spread of random packings of
the same pieces decoded alone without timestamps.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from voxlane.audio.features import FRAMES_PER_SECOND, N_FRAMES

GAP_FRAMES = FRAMES_PER_SECOND
"""Silence between two windows of a pack (1 s)."""
PACK_FRAMES = N_FRAMES - FRAMES_PER_SECOND
"""Frames a pack may fill (29 s): the last second stays silent, as after any window's audio."""
MARGIN = 10
"""Encoder positions (20 ms each) kept either side of a window's own frames."""
SILENCE_CACHE = 16
"""Silence encodings kept, by noise floor (LRU): a floor is the quietest log-mel value of a window."""


THIN_WORDS_PER_S = 1.0
"""A packed decode with fewer words than this per second of the window's audio may have stopped early."""
WORDS_PER_SPEECH_S = 2.5
"""Words a second of speech holds, at least: speech runs at 2-3 words a second."""
UNREAD_SPEECH_S = 1.0
"""Seconds of speech (voice activity detection's) a packed decode may leave unread before it is decoded again."""


def thin(text: str, duration_s: float, speech_s: float | None = None) -> bool:
    """Whether a packed window's text is too short for its audio, so that it is decoded again unpacked:
    without timestamps, Whisper sometimes ends its text early ("Blue was ready to go." for 20 words in 10.4 s)
    or reads nothing (docs/asr-engine.md). Thin: no words; or fewer than THIN_WORDS_PER_S a second of the
    window, with UNREAD_SPEECH_S or more of its speech (``speech_s``; the whole window when unknown) left
    over at WORDS_PER_SPEECH_S. A voice command ("Firefox." in 2.4 s, 1.3 s of it speech) is not thin: the
    words-per-second rule alone sent nearly every short clip back for a second encoder pass."""
    words = len(text.split())
    if words == 0:
        return True
    if words >= THIN_WORDS_PER_S * duration_s:
        return False
    speech = duration_s if speech_s is None else speech_s
    return speech - words / WORDS_PER_SPEECH_S >= UNREAD_SPEECH_S


def plan(n_frames: Sequence[int], limit: int = PACK_FRAMES, gap: int = GAP_FRAMES) -> list[list[int]]:
    """Indices of ``n_frames`` grouped into packs, in order: each pack's frames and the gaps between them fit
    ``limit``. A window alone in its pack is encoded as usual."""
    packs: list[list[int]] = []
    used = 0
    for i, n in enumerate(n_frames):
        if packs and used + gap + n <= limit:
            packs[-1].append(i)
            used += gap + n
        else:
            packs.append([i])
            used = n
    return packs


def floor_of(features: np.ndarray) -> float:
    """A window's noise floor: its quietest log-mel value (the value its padding holds)."""
    return float(features.min())


def pack_features(
    members: Sequence[tuple[np.ndarray, int]], gap: int = GAP_FRAMES
) -> tuple[np.ndarray, float, list[tuple[int, int]]]:
    """One 30 s window of the members' (features, frames with audio), their frames one after the other with
    ``gap`` of silence between; the window's floor (the loudest member's floor, which every frame is raised
    to, as Whisper's log-mel clips each window to its maximum minus 8) and each member's frame span."""
    floor = max(floor_of(f) for f, _ in members)
    out = np.full((members[0][0].shape[0], N_FRAMES), floor, dtype=np.float32)
    spans = []
    at = 0
    for features, n in members:
        out[:, at : at + n] = np.maximum(features[:, :n], floor)
        spans.append((at, at + n))
        at += n + gap
    return out, floor, spans


def splice(pack: np.ndarray, silence: np.ndarray, span: tuple[int, int], margin: int = MARGIN) -> np.ndarray:
    """One member's encoder output: ``silence`` (positions x dims), with the pack's output over the member's
    frames (two frames a position) and ``margin`` positions either side."""
    start = max(0, span[0] // 2 - margin)
    end = min(len(silence), (span[1] + 1) // 2 + margin)
    row = silence.copy()
    row[start:end] = pack[start:end]
    return row


class SilenceEncodings:
    """The encoder's output for 30 s of silence at a noise floor, computed once per floor (rounded to 0.01)
    and kept for the last SILENCE_CACHE floors. Thread-safe."""

    def __init__(self, encode: Callable[[np.ndarray], np.ndarray], n_mels: int) -> None:
        self._encode = encode
        self._n_mels = n_mels
        self._cache: OrderedDict[float, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __call__(self, floor: float) -> np.ndarray:
        key = round(floor, 2)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        encoded = self._encode(np.full((1, self._n_mels, N_FRAMES), key, dtype=np.float32))[0]
        with self._lock:
            self._cache[key] = encoded
            while len(self._cache) > SILENCE_CACHE:
                self._cache.popitem(last=False)
        return encoded
