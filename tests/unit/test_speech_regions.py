"""The speech regions of a window and their edges (voxlane/speakers/features.py ``speech_regions``,
``speech_edges``) on made-up audio: loud frames over the window's floor; the edges over the floor of the
frames that hold any signal."""

from __future__ import annotations

import numpy as np

from voxlane.audio.pipeline import window_features
from voxlane.speakers.features import (
    FEATURE_COLUMNS,
    FRAMES_PER_S,
    N_MELS,
    SAMPLE_RATE,
    speaker_features,
    speech_edges,
    speech_regions,
    window_all_features,
    window_speaker_features,
)


def noise(seconds: float, dbfs: float, rng: np.random.Generator) -> np.ndarray:
    return (rng.standard_normal(int(seconds * SAMPLE_RATE)) * 10 ** (dbfs / 20)).astype(np.float32)


def turn(rng: np.random.Generator) -> list[np.ndarray]:
    """Room noise (-65 dBFS), 1 s of speech-loud sound (-25 dBFS), room noise again."""
    return [noise(0.6, -65, rng), noise(1.0, -25, rng), noise(0.6, -65, rng)]


def test_beside_digital_silence_the_edges_are_the_speech_not_the_room_noise() -> None:
    # Two turns put together with zeros between them (as an editor or a mixer does): over the zeros, the
    # window's floor is far under the room noise, so each region takes in its turn's noise; its edges do not.
    rng = np.random.default_rng(3)
    zeros = np.zeros(SAMPLE_RATE, dtype=np.float32)
    features = speaker_features(np.concatenate([zeros, *turn(rng), zeros, *turn(rng)]))
    regions = speech_regions(features)
    assert [(round(a / FRAMES_PER_S, 1), round(b / FRAMES_PER_S, 1)) for a, b in regions] == [(1.0, 3.2), (4.2, 6.4)]
    edges = speech_edges(features, regions)
    for (first, end), start in zip(edges, [1.6, 4.8]):  # each turn's loud second
        assert abs(first / FRAMES_PER_S - start) <= 0.05
        assert abs(end / FRAMES_PER_S - (start + 1.0)) <= 0.05


def test_without_digital_silence_regions_and_edges_are_the_loud_frames() -> None:
    rng = np.random.default_rng(4)
    features = speaker_features(np.concatenate(turn(rng)))
    regions = speech_regions(features)
    assert len(regions) == 1
    first, end = regions[0]
    assert abs(first / FRAMES_PER_S - 0.6) <= 0.05 and abs(end / FRAMES_PER_S - 1.6) <= 0.05
    assert speech_edges(features, regions) == regions


def test_without_the_filterbanks_a_window_has_the_same_mel_regions_and_edges() -> None:
    # For GE2E the API process computes the mel alone: the columns it sends are the mel's, the regions and
    # edges (from the mel's level) the same as with the filterbanks beside it.
    rng = np.random.default_rng(5)
    pcm = (np.concatenate([*turn(rng), np.zeros(SAMPLE_RATE, dtype=np.float32), *turn(rng)]) * 32767).astype(np.int16)
    both, regions, edges = window_speaker_features(pcm)
    mel, mel_regions, mel_edges = window_speaker_features(pcm, fbank=False)
    assert both.shape[1] == FEATURE_COLUMNS and mel.shape[1] == N_MELS
    np.testing.assert_array_equal(mel, both[:, :N_MELS])
    assert (mel_regions, mel_edges) == (regions, edges) and len(regions) == 2


def test_whisper_s_transform_gives_the_speaker_mel_of_its_own() -> None:
    # A diarized window is transformed once (window_all_features): the speaker mel read off Whisper's power
    # spectrum, its edge frames (reflected there, zeros here) transformed again, is the mel of its own. Loud
    # audio takes no gain, quiet audio is raised to -30 dBFS; a full 30 s window reflects at its end too.
    rng = np.random.default_rng(7)
    for seconds, dbfs in ((30.0, -20), (30.0, -55), (12.34, -20), (12.34, -55), (0.03, -20)):
        pcm = (noise(seconds, dbfs, rng) * 32767).astype(np.int16)
        alone = window_speaker_features(pcm)
        features, n_frames, speech, shared = window_all_features(pcm, 80, 0.0, None, True)
        whisper, whisper_frames, whisper_speech = window_features(pcm, 80)
        np.testing.assert_array_equal(features, whisper)
        assert (n_frames, speech) == (whisper_frames, whisper_speech)
        assert shared[0].shape == alone[0].shape
        np.testing.assert_allclose(shared[0], alone[0], rtol=2e-5, atol=1e-9 * float(alone[0].max()))
        assert (shared[1], shared[2]) == (alone[1], alone[2])


def test_the_speaker_mel_reads_whisper_s_transform(monkeypatch) -> None:
    # The saving itself: given Whisper's power spectrum, only the edge frames are transformed again (2 at the
    # start, 2 at the end of a 30 s window and the one past Whisper's 3000), not the window's 3001.
    from voxlane.speakers import features as speaker_module

    transformed: list[int] = []
    power_of = speaker_module._power

    def counting(x: np.ndarray, frames: range | list[int]) -> np.ndarray:
        transformed.extend(frames)
        return power_of(x, frames)

    monkeypatch.setattr(speaker_module, "_power", counting)
    pcm = (noise(30.0, -20, np.random.default_rng(8)) * 32767).astype(np.int16)
    window_all_features(pcm, 80, 0.0, None, False)
    assert transformed == [0, 1, 2999, 3000]
