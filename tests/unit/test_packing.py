"""runners/packing.py: which short windows share an encoder pass, where their frames go, and what each one's
decode reads (its own stretch of the pack's encoder output, silence elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest

from voxlane.audio.features import N_FRAMES
from voxlane.runners import packing


def test_plan_fills_packs_in_order_up_to_29_seconds_with_a_second_between() -> None:
    assert packing.plan([300, 300, 300]) == [[0, 1, 2]]
    # 1,200 + 100 + 1,200 = 2,500 frames fit 2,900; a third 1,200 does not.
    assert packing.plan([1200, 1200, 1200]) == [[0, 1], [2]]
    assert packing.plan([1400, 1400]) == [[0, 1]]  # 2,900 exactly
    assert packing.plan([1401, 1400]) == [[0], [1]]
    assert packing.plan([500, 2900, 500]) == [[0], [1], [2]]  # order kept: no window jumps the queue
    assert packing.plan([]) == []


def _features(n: int, loud: float, floor: float) -> np.ndarray:
    f = np.full((80, N_FRAMES), floor, dtype=np.float32)
    f[:, :n] = loud
    return f


def test_pack_features_places_each_window_after_a_gap_on_the_loudest_floor() -> None:
    a, b = _features(200, 1.0, -0.5), _features(300, 0.5, -0.8)
    out, floor, spans = packing.pack_features([(a, 200), (b, 300)])
    assert out.shape == (80, N_FRAMES) and floor == -0.5
    assert spans == [(0, 200), (300, 600)]
    assert (out[:, :200] == 1.0).all() and (out[:, 300:600] == 0.5).all()
    assert (out[:, 200:300] == -0.5).all() and (out[:, 600:] == -0.5).all()  # gap and tail: silence
    quiet = _features(100, -0.9, -0.9)  # a window quieter than the pack's floor is raised to it
    out, _, _ = packing.pack_features([(a, 200), (quiet, 100)])
    assert (out[:, 300:400] == -0.5).all()


def test_splice_takes_the_window_own_positions_and_a_margin_and_silence_elsewhere() -> None:
    pack = np.ones((1500, 4), dtype=np.float32)
    silence = np.zeros((1500, 4), dtype=np.float32)
    row = packing.splice(pack, silence, (300, 600), margin=10)
    taken = np.flatnonzero(row[:, 0])
    assert taken[0] == 150 - 10 and taken[-1] == 300 + 10 - 1  # frames 300-600 are positions 150-300
    assert silence.sum() == 0  # the cached silence is copied, never written
    assert packing.splice(pack, silence, (0, 100), margin=10)[0, 0] == 1.0  # clipped at the window's start


def test_silence_encodings_are_computed_once_per_floor_and_bounded() -> None:
    calls: list[float] = []

    def encode(features: np.ndarray) -> np.ndarray:
        calls.append(float(features[0, 0, 0]))
        return np.full((1, 1500, 4), features[0, 0, 0], dtype=np.float32)

    silence = packing.SilenceEncodings(encode, 80)
    assert silence(-0.501)[0, 0] == pytest.approx(-0.5)
    silence(-0.499)  # the same floor to 0.01: cached
    assert calls == [pytest.approx(-0.5)]
    for k in range(packing.SILENCE_CACHE + 3):
        silence(-1.0 - k / 10)
    assert len(silence._cache) == packing.SILENCE_CACHE
    silence(-0.5)  # evicted (least recently used): computed again
    assert len(calls) == 1 + packing.SILENCE_CACHE + 3 + 1


def test_a_packed_decode_with_too_few_words_for_its_audio_is_thin() -> None:
    assert packing.thin("", 2.0)  # read nothing
    assert packing.thin("", 2.0, 1.0)
    # 5 words of 10.4 s, 6 s of it speech: the decode stopped early (the dev set read 20 words there)
    assert packing.thin("Blue was ready to go.", 10.4, 6.0)
    assert packing.thin("Blue was ready to go.", 10.4)  # no speech detection: all 10.4 s count
    assert packing.thin("I want to do something good with it.", 11.7, 6.2)  # 8 words: 3 s of speech unread
    assert not packing.thin("Please call Stella.", 2.0)
    assert not packing.thin("Blue was ready to go. How are you getting on with your bikes?", 10.4, 6.0)
    # Voice commands: few words in a clip with silence around them are whole
    assert not packing.thin("Firefox.", 2.4, 1.3)
    assert not packing.thin("Montreal, forced liner.", 4.8, 2.0)
