"""The two jobs the API process runs on its audio preprocessing pool. Top-level functions of plain
data, so they run in a thread pool or a process pool alike."""

from __future__ import annotations

import numpy as np

from voxlane.audio.decode import TARGET_RATE, decode_audio
from voxlane.audio.features import log_mel
from voxlane.audio.split import split_windows


def decode_and_split(data: bytes, max_duration_s: float,
                     search_s: float) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Upload bytes -> (16 kHz mono samples, [(start, end) sample ranges of <= 30 s windows])."""
    audio = decode_audio(data, max_duration_s)
    windows = split_windows(audio.samples, TARGET_RATE, search_s=search_s)
    return audio.samples, [(w.start, w.end) for w in windows]


def window_features(samples: np.ndarray, n_mels: int) -> tuple[np.ndarray, int]:
    """One window's log-mel features, padded to 30 s, and how many frames hold audio."""
    return log_mel(samples, n_mels)
