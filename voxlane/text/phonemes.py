"""Phonemisation with espeak-ng through Piper: a unit's text -> the voice's phoneme ids.

Not thread-safe (espeak holds global state): call only from the single-worker ``text`` executor.
Piper is imported where a phonemiser is needed, not at the top: the API process imports this module for
its types and function names, and ``import piper`` loads onnxruntime (piper/__init__ imports its voice).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    from piper.phonemize_espeak import EspeakPhonemizer

_phonemizer: EspeakPhonemizer | None = None


@dataclass(frozen=True)
class VoiceText:
    """What phonemisation needs from a voice's ``.onnx.json``, and the voice's inference defaults."""

    espeak_voice: str
    phoneme_type: str
    phoneme_id_map: Mapping[str, Sequence[int]]
    sample_rate: int
    length_scale: float
    noise_scale: float
    noise_w_scale: float
    num_speakers: int

    @classmethod
    def from_config(cls, config: dict) -> VoiceText:
        inference = config.get("inference", {})
        return cls(
            espeak_voice=config["espeak"]["voice"],
            phoneme_type=config.get("phoneme_type", "espeak"),
            phoneme_id_map=config["phoneme_id_map"],
            sample_rate=int(config["audio"]["sample_rate"]),
            length_scale=float(inference.get("length_scale", 1.0)),
            noise_scale=float(inference.get("noise_scale", 0.667)),
            noise_w_scale=float(inference.get("noise_w", 0.8)),
            num_speakers=int(config.get("num_speakers", 1)),
        )


@lru_cache(maxsize=64)
def load_voice_text(config_path: str) -> VoiceText:
    """Parse a voice config. Paths are never reused for other content (see voxlane/voices.py), so caching
    by path is safe. Raises ValueError saying what is missing."""
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    try:
        voice = VoiceText.from_config(config)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the voice config lacks a Piper field ({exc})") from None
    if voice.phoneme_type not in ("espeak", "text"):
        raise ValueError(f"phoneme_type {voice.phoneme_type!r} is not supported; voxlane speaks espeak and text voices")
    return voice


def phoneme_ids(text: str, voice: VoiceText) -> list[int]:
    """One unit's ids. espeak may see several sentences in it; they are joined with a pause, as one unit."""
    from piper.phoneme_ids import phonemes_to_ids

    if voice.phoneme_type == "text":
        return phonemes_to_ids(list(unicodedata.normalize("NFD", text)), voice.phoneme_id_map)
    sentences = [s for s in _espeak().phonemize(voice.espeak_voice, text) if s]
    phonemes: list[str] = []
    for sentence in sentences:
        if phonemes:
            phonemes.append(" ")
        phonemes.extend(sentence)
    return phonemes_to_ids(phonemes, voice.phoneme_id_map) if phonemes else []


def _espeak() -> EspeakPhonemizer:
    global _phonemizer
    if _phonemizer is None:
        from piper.phonemize_espeak import ESPEAK_DATA_DIR, EspeakPhonemizer

        _phonemizer = EspeakPhonemizer(ESPEAK_DATA_DIR)
    return _phonemizer


def prepare(text: str, config_path: str) -> tuple[VoiceText, list[str], list[int]]:
    """A speech request's text work up front: the voice's text config, the units to speak (normalised,
    split), and the first unit's phoneme ids."""
    from voxlane.text.normalise import normalise
    from voxlane.text.sentences import split_units

    voice_text = load_voice_text(config_path)
    units = split_units(normalise(text))
    return voice_text, units, phoneme_ids(units[0], voice_text) if units else []
