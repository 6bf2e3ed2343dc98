"""Silero VAD spans and the windows packed from them, on real speech from the dev set."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.conftest import DEV_DIR
from voxlane.audio.decode import TARGET_RATE, decode_audio
from voxlane.audio.features import log_mel
from voxlane.audio.pipeline import decode_and_split, window_features
from voxlane.audio.vad import (
    ENERGY_ENOUGH_S,
    VadOptions,
    energy_speech,
    speech_spans,
    speech_windows,
    window_speech,
)


def load(name: str) -> np.ndarray:
    return decode_audio((DEV_DIR / "audio" / name).read_bytes(), 3600.0).samples


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return load("vctk_p225_020.opus")


def test_noise_has_no_speech_and_no_windows() -> None:
    noise = load("noise_only_pink_-60dBFS_25s.flac")
    assert speech_spans(noise) == []
    assert speech_windows(noise) == []


def test_a_short_clip_with_speech_is_one_whole_window(speech: np.ndarray) -> None:
    spans = speech_spans(speech)
    assert spans and spans[0][0] > 0  # Silero finds the speech, not the leading silence
    windows = speech_windows(speech)
    assert [(w.start, w.end) for w in windows] == [(0, len(speech))]


def test_long_silence_is_not_decoded_and_windows_keep_true_offsets(speech: np.ndarray) -> None:
    gap = np.zeros(int(20 * TARGET_RATE), dtype=np.float32)
    audio = np.concatenate([speech, gap, speech, gap, speech])
    windows = speech_windows(audio)
    assert len(windows) == 3
    n, g, margin = len(speech), len(gap), 2 * TARGET_RATE
    quiet = [(n + margin, n + g - margin), (2 * n + g + margin, 2 * n + 2 * g - margin)]
    for w in windows:
        assert w.length <= 30 * TARGET_RATE
        assert all(w.end <= a or w.start >= b for a, b in quiet)  # nothing of the gap's middle
    for span_start, span_end in speech_spans(audio):
        assert any(w.start <= span_start and span_end <= w.end for w in windows), "speech left out"


def test_speech_longer_than_30_s_is_cut_at_pauses_into_windows_of_at_most_30_s(speech: np.ndarray) -> None:
    pause = np.zeros(int(0.5 * TARGET_RATE), dtype=np.float32)
    audio = np.concatenate([part for _ in range(12) for part in (speech, pause)])  # ~69 s, pauses < MAX_GAP_S
    windows = speech_windows(audio)
    assert len(windows) == 3
    assert all(w.length <= 30 * TARGET_RATE for w in windows)
    assert all(a.end == b.start for a, b in itertools.pairwise(windows))  # one region: no audio left out
    for w in windows[:-1]:
        # each cut is in a pause, not in a word
        assert np.abs(audio[w.end - 800 : w.end + 800]).max() < 0.01


def test_options_change_what_counts_as_speech(speech: np.ndarray) -> None:
    strict = speech_spans(speech, VadOptions(threshold=0.99))
    loose = speech_spans(speech, VadOptions(threshold=0.2))
    assert sum(b - a for a, b in strict) < sum(b - a for a, b in loose)
    unpadded = speech_spans(speech, VadOptions(prefix_padding_ms=0))
    padded = speech_spans(speech, VadOptions(prefix_padding_ms=300))
    assert padded[0][0] <= unpadded[0][0] - int(0.29 * TARGET_RATE)


def test_every_window_carries_the_speech_found_in_it(speech: np.ndarray) -> None:
    import io

    import soundfile as sf

    # Noise, not digital silence, between the two: a silent window is dropped before it gets this far.
    gap = np.tile(load("noise_only_pink_-60dBFS_25s.flac"), 3)[: int(60 * TARGET_RATE)]
    audio = np.concatenate([speech, gap, speech])
    data = io.BytesIO()
    sf.write(data, audio, TARGET_RATE, format="WAV")
    split = decode_and_split(data.getvalue(), 3600.0, 8.0)  # all of the audio, in 30 s windows
    assert split.silent_s == 0
    assert all(w.speech is None for w in split.windows)  # found window by window, by window_features
    found = []
    for w in split.windows:
        _, _, spans = window_features(w.pcm, 80, w.offset_s)
        assert all(w.start / TARGET_RATE <= a < b <= w.end / TARGET_RATE for a, b in spans)
        found.append((w.start, w.end, spans))
    assert found[0][2] and found[-1][2]
    middle = [w for w in found if w[0] > len(speech) + 2 * TARGET_RATE and w[1] < len(audio) - len(speech)]
    assert middle and all(w[2] == [] for w in middle)


def test_energy_finds_speech_and_silero_confirms_quiet_windows(speech: np.ndarray) -> None:
    """Loud speech is found by energy (its spans are unpadded frame runs); a window of noise has no loud
    frames, so Silero decides, and finds none."""
    features, n_frames = log_mel(speech)
    loud = energy_speech(features, n_frames)
    assert sum(b - a for a, b in loud) >= ENERGY_ENOUGH_S * 100
    assert window_speech(speech, features, n_frames, 5.0) == [(5.0 + a / 100, 5.0 + b / 100) for a, b in loud]
    noise = load("noise_only_pink_-60dBFS_25s.flac")
    features, n_frames = log_mel(noise)
    assert energy_speech(features, n_frames) == []
    assert window_speech(noise, features, n_frames, 0.0) == []
