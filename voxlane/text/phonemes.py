"""Phonemisation with espeak-ng through Piper: a unit's text -> the voice's phoneme ids.

Not thread-safe (espeak holds global state): call only from the single-worker ``text`` executor.
Piper is imported where a phonemiser is needed, not at the top: the API process imports this module for
its types and function names, and ``import piper`` loads onnxruntime (piper/__init__ imports its voice).
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from piper.phonemize_espeak import EspeakPhonemizer

from voxlane.voice_config import VoiceConfig, load_voice_config

_phonemizer: EspeakPhonemizer | None = None


def phoneme_ids(text: str, voice: VoiceConfig) -> list[int]:
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


def prepare(text: str, config_path: str, clause_chars: int | None = None) -> tuple[VoiceConfig, list[str], list[int]]:
    """A speech request's text work up front: the voice's config, the units to speak (normalised,
    split; ``clause_chars``: see ``split_units``, None for its default), and the first unit's phoneme ids."""
    from voxlane.text.normalise import normalise
    from voxlane.text.sentences import CLAUSE_CHARS, split_units

    voice_text = load_voice_config(config_path)
    units = split_units(normalise(text), clause_chars=CLAUSE_CHARS if clause_chars is None else clause_chars)
    return voice_text, units, phoneme_ids(units[0], voice_text) if units else []
