from __future__ import annotations

import numpy as np
from faster_whisper.feature_extractor import FeatureExtractor

from voxlane.audio.features import N_FRAMES, N_SAMPLES, log_mel, mel_filters


def test_log_mel_matches_faster_whisper_on_a_padded_window() -> None:
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal(7 * 16000) * 0.1).astype(np.float32)
    reference = FeatureExtractor(feature_size=80)(np.pad(audio, (0, N_SAMPLES - len(audio))), padding=0)
    ours, n_frames = log_mel(audio)
    assert ours.shape == (80, N_FRAMES)
    assert n_frames == 700
    assert np.abs(reference[:, :N_FRAMES] - ours).max() < 1e-4


def test_log_mel_matches_on_a_full_window() -> None:
    rng = np.random.default_rng(2)
    audio = (rng.standard_normal(N_SAMPLES) * 0.2).astype(np.float32)
    reference = FeatureExtractor(feature_size=80)(audio, padding=0)
    ours, n_frames = log_mel(audio)
    assert n_frames == N_FRAMES
    assert np.abs(reference[:, :N_FRAMES] - ours).max() < 1e-4


def test_filter_bank_is_built_once_and_read_only() -> None:
    assert mel_filters(80) is mel_filters(80)
    assert not mel_filters(80).flags.writeable
