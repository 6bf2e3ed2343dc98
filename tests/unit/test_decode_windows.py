"""The streaming decode and the windows it is cut into: the same cuts as the whole-file splitter, int16
exact for 16-bit sources, silent windows dropped, a budget that stops the decode, and steps that give the
same result as one go."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from voxlane.audio.decode import TARGET_RATE, decode_stream
from voxlane.audio.pipeline import OverBudget, SplitSteps, decode_and_split
from voxlane.audio.split import WindowCutter, is_silent, split_windows

SR = TARGET_RATE


def flac(samples: np.ndarray, rate: int = SR) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def speechlike(seconds: float, seed: int = 0, level: float = 3000.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    envelope = 0.5 + 0.5 * np.sin(np.arange(n) * 2 * np.pi / (SR * 1.7))  # syllable-ish rises and pauses
    return (rng.standard_normal(n) * level * envelope).astype(np.int16)


def test_the_cutter_makes_split_windows_cuts_whatever_the_block_sizes() -> None:
    rng = np.random.default_rng(3)
    audio = speechlike(200.0)
    for _ in range(5):
        cutter, got, i = WindowCutter(SR), [], 0
        while i < len(audio):
            size = int(rng.integers(100, 300_000))
            got += cutter.feed(audio[i : i + size])
            i += size
        got += cutter.finish()
        assert [w for w, _ in got] == split_windows(audio, SR)
        assert np.array_equal(np.concatenate([pcm for _, pcm in got]), audio)


def test_silence_is_judged_by_the_loudest_100_ms() -> None:
    rng = np.random.default_rng(0)
    assert is_silent(np.zeros(SR * 30, dtype=np.int16))
    dither = np.zeros(SR * 30, dtype=np.int16)
    dither[rng.integers(0, len(dither), 50)] = 1
    assert is_silent(dither)
    assert is_silent((rng.standard_normal(SR * 30) * 10).astype(np.int16))  # -70 dBFS noise
    assert not is_silent((rng.standard_normal(SR * 30) * 40).astype(np.int16))  # -58 dBFS noise: Whisper judges
    whisper = np.zeros(SR * 30, dtype=np.int16)
    whisper[SR * 10 : SR * 10 + 1600] = (rng.standard_normal(1600) * 200).astype(np.int16)  # 100 ms at -44 dBFS
    assert not is_silent(whisper)


def test_a_16_bit_16_khz_file_decodes_to_its_own_samples() -> None:
    audio = speechlike(100.0)
    blocks: list[np.ndarray] = []
    info = decode_stream(flac(audio), 3600.0, blocks.append)
    assert info.n_samples == len(audio)
    assert all(b.dtype == np.int16 for b in blocks) and len(blocks) > 1
    assert np.array_equal(np.concatenate(blocks), audio)


def test_silent_windows_are_dropped_and_the_others_keep_their_offsets() -> None:
    speech = speechlike(20.0)
    gap = np.zeros(SR * 120, dtype=np.int16)
    audio = np.concatenate([speech, gap, speech])
    split = decode_and_split(flac(audio), 3600.0, 8.0)
    assert split.n_samples == len(audio)
    assert split.silent_s > 60
    for w in split.windows:
        assert np.array_equal(w.pcm, audio[w.start : w.end])
    assert split.windows[0].start == 0 and split.windows[-1].end == len(audio)
    sound_s = sum(w.duration_s for w in split.windows)
    assert sound_s + split.silent_s == pytest.approx(split.duration_s)


def test_hours_of_silence_cost_no_windows() -> None:
    silence = np.zeros(SR * 3600, dtype=np.int16)  # one hour
    silence[:: SR * 7] = 1  # a little dither
    split = decode_and_split(flac(silence), 3 * 3600.0, 8.0)
    assert split.windows == [] and split.duration_s == pytest.approx(3600.0)


def test_the_decode_stops_once_the_audio_passes_the_budget() -> None:
    audio = speechlike(300.0)
    with pytest.raises(OverBudget) as raised:
        decode_and_split(flac(audio), 3600.0, 8.0, budget_s=60.0)
    assert 60.0 < raised.value.kept_s <= 90.0  # it stopped at the window that passed it, not at the end


def test_steps_give_the_result_of_one_go() -> None:
    audio = np.concatenate([speechlike(100.0), np.zeros(SR * 60, dtype=np.int16), speechlike(50.0, seed=1)])
    data = flac(audio, 44100 // 2)  # resampled too
    whole = decode_and_split(data, 3600.0, 8.0)
    steps = SplitSteps(data, 3600.0, 8.0)
    results = []
    while not results or results[-1] is None:
        results.append(steps.step(step_s=20.0))
    assert len(results) > 5
    got = results[-1]
    assert got is not None
    assert [(w.start, w.end) for w in got.windows] == [(w.start, w.end) for w in whole.windows]
    assert all(np.array_equal(a.pcm, b.pcm) for a, b in zip(got.windows, whole.windows))
