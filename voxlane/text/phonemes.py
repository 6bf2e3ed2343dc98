"""Phonemisation with espeak-ng through Piper: a unit's text -> the voice's phoneme ids.

Not thread-safe (espeak holds global state): call only from the single-worker ``text`` executor.
"""

from __future__ import annotations

import unicodedata

from piper.phoneme_ids import phonemes_to_ids
from piper.phonemize_espeak import ESPEAK_DATA_DIR, EspeakPhonemizer

from voxlane.voice_config import VoiceConfig, load_voice_config

_phonemizer: EspeakPhonemizer | None = None


def phoneme_ids(text: str, voice: VoiceConfig) -> list[int]:
    """One unit's ids. espeak may see several sentences in it; they are joined with a pause, as one unit."""
    global _phonemizer
    if voice.phoneme_type == "text":
        return phonemes_to_ids(list(unicodedata.normalize("NFD", text)), voice.phoneme_id_map)
    if _phonemizer is None:
        _phonemizer = EspeakPhonemizer(ESPEAK_DATA_DIR)
    sentences = [s for s in _phonemizer.phonemize(voice.espeak_voice, text) if s]
    phonemes: list[str] = []
    for sentence in sentences:
        if phonemes:
            phonemes.append(" ")
        phonemes.extend(sentence)
    return phonemes_to_ids(phonemes, voice.phoneme_id_map) if phonemes else []


def prepare(text: str, config_path: str) -> tuple[VoiceConfig, list[str], list[int]]:
    """A speech request's text work up front: the voice's config, the units to speak (normalised,
    split), and the first unit's phoneme ids."""
    from voxlane.text.normalise import normalise
    from voxlane.text.sentences import split_units

    voice_text = load_voice_config(config_path)
    units = split_units(normalise(text))
    return voice_text, units, phoneme_ids(units[0], voice_text) if units else []
