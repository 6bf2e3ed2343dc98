"""The speaker encoder's input: a 40-band mel power spectrogram of 16 kHz audio, 25 ms windows every 10 ms,
as Resemblyzer computes it with librosa (``melspectrogram(n_fft=400, hop_length=160, n_mels=40)``: Slaney
mel filters, a periodic Hann window, centred frames, power, no log), after its loudness normalisation
(raised to -30 dBFS, never lowered)."""

from __future__ import annotations

import itertools

import numpy as np

from voxlane.audio.features import hann_window, mel_filters
from voxlane.audio.shared import attach

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 40
FRAMES_PER_S = SAMPLE_RATE // HOP
TARGET_DBFS = -30.0


def speaker_mel(samples: np.ndarray, loudness_of: np.ndarray | None = None) -> np.ndarray:
    """(frames, 40) float32: frame ``i`` is centred on sample ``i * 160``. The loudness gain is measured on
    ``loudness_of`` (the speech in ``samples``) when given, so that pauses do not raise it."""
    x = samples.astype(np.float32) / 32768.0 if samples.dtype == np.int16 else samples.astype(np.float32)
    ref = x if loudness_of is None or not len(loudness_of) else loudness_of
    rms_db = 10 * np.log10(max(float(np.mean(ref.astype(np.float64) ** 2)), 1e-20))
    gain_db = TARGET_DBFS - rms_db
    if gain_db > 0:
        x = x * np.float32(10 ** (gain_db / 20))
    half = N_FFT // 2
    padded = np.zeros(len(x) + N_FFT, dtype=np.float32)
    padded[half : half + len(x)] = x
    n_frames = 1 + len(x) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[: n_frames * HOP : HOP]
    spectrum = np.fft.rfft(frames * hann_window(N_FFT), axis=-1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    return np.ascontiguousarray(power @ mel_filters(N_MELS, SAMPLE_RATE, N_FFT).T)


SPEECH_RISE_DB = 10.0
"""A frame is speech when its level is this far above the window's quietest tenth (its floor)."""
PAUSE_FRAMES = 15
"""Quieter stretches shorter than this (150 ms) do not end a region: a pause between words, not turns."""
MIN_REGION_FRAMES = 20
MAX_REGION_FRAMES = 300
"""Regions longer than 3 s are cut into equal parts of at most 3 s, so that a change of speaker without a
pause still falls between two regions' embeddings."""


def speech_regions(mel: np.ndarray) -> list[tuple[int, int]]:
    """(first, end) frames of the speech in a window's speaker mel: loud stretches, bridged over pauses
    shorter than PAUSE_FRAMES, cut to at most MAX_REGION_FRAMES; each region gets one embedding, so the
    pauses between turns are where speakers can change."""
    if not len(mel):
        return []
    level = 10 * np.log10(mel.sum(axis=1) + 1e-10)
    loud = level > np.percentile(level, 10) + SPEECH_RISE_DB
    edges = np.flatnonzero(np.diff(np.concatenate(([0], loud.astype(np.int8), [0]))))
    merged: list[list[int]] = []
    for a, b in zip(edges[::2], edges[1::2]):
        if merged and a - merged[-1][1] < PAUSE_FRAMES:
            merged[-1][1] = int(b)
        else:
            merged.append([int(a), int(b)])
    out = []
    for a, b in merged:
        if b - a < MIN_REGION_FRAMES:
            continue
        parts = -(-(b - a) // MAX_REGION_FRAMES)
        bounds = np.linspace(a, b, parts + 1).round().astype(int)
        out += [(int(x), int(y)) for x, y in itertools.pairwise(bounds)]
    return out


def window_speaker_features(pcm: np.ndarray | tuple[str, int, int]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(speaker mel, speech regions) of one window: its int16 samples, or (block, first sample, count) in a
    block of shared memory (audio/shared.py), read without removing it. On the audio pool."""
    if isinstance(pcm, tuple):
        name, start, count = pcm
        with attach(name) as block:
            pcm = np.frombuffer(block, dtype=np.int16, count=count, offset=2 * start).copy()
    mel = speaker_mel(pcm)
    return mel, speech_regions(mel)
