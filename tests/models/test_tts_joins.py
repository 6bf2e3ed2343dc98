"""Joins between speech units, with the real bundled voice: a stream's first sentence is cut into short
units (faster first audio), and those joins must sound like nothing, or at most like a sentence break.

Each paragraph is split and synthesised unit by unit as the server does, noise off (normalise, split_units,
phoneme ids, the Piper runner's scaling), and the units are concatenated as the client receives them.
At every join we look at what a listener would hear as a seam:
- a click: the step between the last sample of one unit and the first of the next, against the largest
  steps of the speech itself (its 99.9th percentile of sample-to-sample differences);
- a jump in loudness: the speech level (RMS of the voiced 11.6 ms frames) of the unit before and after.
Joins inside a sentence (clause cuts) are compared with the joins at sentence ends of the same text.
"""

from __future__ import annotations

import numpy as np
import pytest

from voxlane.bench.paragraphs import PARAGRAPHS
from voxlane.config import default_voice_paths
from voxlane.messages import SpeechUnit
from voxlane.text.normalise import normalise
from voxlane.text.sentences import split_units

piper = pytest.importorskip("voxlane.runners.piper")
phonemes = pytest.importorskip("voxlane.text.phonemes")

_FRAME = 256


def _level_db(pcm: np.ndarray) -> float:
    frames = pcm[: len(pcm) // _FRAME * _FRAME].astype(np.float64).reshape(-1, _FRAME)
    rms = np.sqrt((frames**2).mean(axis=1))
    voiced = rms[rms > 0.05 * rms.max()]
    return float(20 * np.log10(np.sqrt((voiced**2).mean())))


@pytest.fixture(scope="module")
def joins() -> dict[str, list[tuple[float, float, str]]]:
    """(step at the join / the speech's p99.9 step, loudness change in dB, text before) per kind of join."""
    from voxlane.voice_config import load_voice_config

    model, config = default_voice_paths()
    voice_config = load_voice_config(config)
    voice = piper.load_voice(model, config, 1)
    out: dict[str, list[tuple[float, float, str]]] = {"clause": [], "sentence": []}
    for text in PARAGRAPHS[:6]:
        units = split_units(normalise(text))
        pcms = []
        for i, unit_text in enumerate(units):
            ids = phonemes.phoneme_ids(unit_text, voice_config)
            # Noise off: Piper samples its noise anew on every call, and with the voice's noise the
            # loudest clause join moved by +-1 dB from run to run (the max check failed 1 run in 4); what is
            # tested is what the split and the runner's scaling do to the joins.
            unit = SpeechUnit(
                "joins", i, i == len(units) - 1, model, config, ids,
                voice_config.length_scale, 0.0, 0.0, None,
            )  # fmt: skip
            pcms.append(piper.run_voice(voice, unit)[0])
        stream = np.concatenate(pcms).astype(np.float64)
        typical_step = float(np.percentile(np.abs(np.diff(stream)), 99.9))
        at = np.cumsum([len(p) for p in pcms])[:-1]
        for before, after, pos, unit_text in zip(pcms, pcms[1:], at, units):
            kind = "sentence" if unit_text.rstrip()[-1:] in ".!?" else "clause"
            step = abs(stream[pos] - stream[pos - 1]) / typical_step
            out[kind].append((step, abs(_level_db(before) - _level_db(after)), unit_text))
    return out


def test_the_first_sentences_are_cut_into_short_units(joins) -> None:
    assert len(joins["clause"]) >= 6, "the split made no joins inside sentences to check"
    assert len(joins["sentence"]) >= 6


def test_no_click_at_any_join(joins) -> None:
    for kind, found in joins.items():
        for step, _, text in found:
            assert step < 1.0, f"a click after {text!r} ({kind} join): a step {step:.1f}x the speech's p99.9"


def test_joins_inside_a_sentence_change_loudness_no_more_than_sentence_breaks(joins) -> None:
    clause = [db for _, db, _ in joins["clause"]]
    sentence = [db for _, db, _ in joins["sentence"]]
    print(f"loudness change at joins, dB: clause median {np.median(clause):.2f} max {max(clause):.2f}; "
          f"sentence median {np.median(sentence):.2f} max {max(sentence):.2f}")  # fmt: skip
    assert np.median(clause) <= np.median(sentence) + 1.0
    assert max(clause) <= max(sentence) + 1.5
