"""Phonemisation with espeak-ng through Piper: a unit's text -> the voice's phoneme ids.

Not thread-safe (espeak holds global state): call only from the single-worker ``text`` executor.
Piper is imported where a phonemiser is needed, not at the top: the API process imports this module for
its types and function names, and ``import piper`` loads onnxruntime (piper/__init__ imports its voice).
"""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from piper.phonemize_espeak import EspeakPhonemizer

from voxlane.text.ssml import SsmlError, SsmlUnit, is_ssml, parse_ssml
from voxlane.text.timings import PlannedWord, Segment, TokenMarks, plan_words, spread_marks, token_marks
from voxlane.voice_config import VoiceConfig, load_voice_config

_phonemizer: EspeakPhonemizer | None = None


def phoneme_ids(text: str, voice: VoiceConfig) -> list[int]:
    """One unit's ids. espeak may see several sentences in it; they are joined with a pause, as one unit."""
    from piper.phoneme_ids import phonemes_to_ids

    phonemes = _phoneme_list(text, voice)
    if voice.phoneme_type == "text":
        return phonemes_to_ids(phonemes, voice.phoneme_id_map)
    return phonemes_to_ids(phonemes, voice.phoneme_id_map) if phonemes else []


def _phoneme_list(text: str, voice: VoiceConfig) -> list[str]:
    """The unit's phonemes as Piper reads them: espeak's sentences joined by a space (or, for a ``text``
    voice, the text's characters)."""
    if voice.phoneme_type == "text":
        return list(unicodedata.normalize("NFD", text))
    phonemes: list[str] = []
    for sentence in (s for s in _espeak().phonemize(voice.espeak_voice, text) if s):
        if phonemes:
            phonemes.append(" ")
        phonemes.extend(sentence)
    return phonemes


def _espeak() -> EspeakPhonemizer:
    global _phonemizer
    if _phonemizer is None:
        from piper.phonemize_espeak import ESPEAK_DATA_DIR, EspeakPhonemizer

        _phonemizer = EspeakPhonemizer(ESPEAK_DATA_DIR)
    return _phonemizer


def ipa_ids(ipa: str, voice: VoiceConfig) -> list[int]:
    """Ids of IPA written by hand (SSML's ``phoneme ph=``), symbol by symbol as espeak's output is. Raises
    SsmlError naming the symbols the voice has no id for."""
    from piper.phoneme_ids import phonemes_to_ids

    symbols = list(unicodedata.normalize("NFD", " ".join(ipa.split())))
    unknown = sorted({s for s in symbols if s not in voice.phoneme_id_map})
    if unknown:
        known = "".join(sorted(s for s in voice.phoneme_id_map if len(s) == 1 and s not in "^$_"))
        raise SsmlError(
            f"phoneme ph='{ipa}' has symbols this voice cannot say: {' '.join(unknown)}; "
            f"send IPA from the voice's set: {known}"
        )
    return phonemes_to_ids(symbols, voice.phoneme_id_map)


def unit_ids(unit: SsmlUnit, voice: VoiceConfig) -> list[int]:
    """One unit's ids: from its IPA if it has some, else from its text (``phoneme_ids``)."""
    return ipa_ids(unit.phonemes, voice) if unit.phonemes is not None else phoneme_ids(unit.text, voice)


def prepare(
    text: str, config_path: str, clause_chars: int | None = None
) -> tuple[VoiceConfig, list[SsmlUnit], list[int]]:
    """A speech request's text work up front: the voice's config, the units to speak (normalised,
    split; ``clause_chars``: see ``split_units``, None for its default), and the first unit's phoneme ids.

    Plain text gives units with no pause, at rate 1. SSML (see ``is_ssml``) is parsed first, and each of its
    units split the same way, the pieces of a unit sharing its rate and the last one taking its pause; its
    IPA is checked against the voice here, so that a symbol the voice lacks is an error before any audio.
    Raises SsmlError for SSML that cannot be spoken."""
    voice_text = load_voice_config(config_path)
    units, _ = split_input(text, voice_text, clause_chars)
    if not units:
        return voice_text, [], []
    return voice_text, units, unit_ids(units[0], voice_text) or pause_ids(voice_text)


def prepare_timed(
    text: str, config_path: str, clause_chars: int | None = None
) -> tuple[VoiceConfig, list[SsmlUnit], list[int], list[int], list[PlannedWord]]:
    """``prepare`` for a request that wants word timings: also the first unit's marks (``unit_ids_marked``)
    and the plan that ties the input's words to every unit's marks (``timings.plan_words``)."""
    voice_text = load_voice_config(config_path)
    units, segments = split_input(text, voice_text, clause_chars)
    if not units:
        return voice_text, [], [], [], []
    ids, marks = unit_ids_marked(units[0], voice_text)
    return voice_text, units, ids, marks.marks, plan_words(segments, [u.text for u in units])


def split_input(
    text: str, voice_text: VoiceConfig, clause_chars: int | None = None
) -> tuple[list[SsmlUnit], list[Segment]]:
    """The units to speak (none when nothing is speakable) and the written segments they came from."""
    from voxlane.text.normalise import normalise
    from voxlane.text.sentences import CLAUSE_CHARS, split_units

    chars = CLAUSE_CHARS if clause_chars is None else clause_chars
    if not is_ssml(text):
        units = [SsmlUnit(u) for u in split_units(normalise(text), clause_chars=chars)]
        return units, [Segment(text, 0, len(units))]
    units = []
    segments: list[Segment] = []
    for unit in parse_ssml(text):
        written = unit.text if unit.written is None else unit.written
        if unit.phonemes is not None:
            ipa_ids(unit.phonemes, voice_text)
            segments.append(Segment(written, len(units), 1))
            units.append(unit)
            continue
        pieces = split_units(normalise(unit.text), clause_chars=chars)
        if not pieces and units:  # nothing to say (markup only): its pause goes after the unit before
            units[-1] = replace(units[-1], pause_after_s=units[-1].pause_after_s + unit.pause_after_s)
            continue
        pieces = pieces or [""]
        segments.append(Segment(written, len(units), len(pieces)))
        units += [SsmlUnit(p, 0.0, unit.rate) for p in pieces[:-1]]
        units.append(SsmlUnit(pieces[-1], unit.pause_after_s, unit.rate))
    if not any(u.text or u.phonemes for u in units):
        return [], []
    return units, segments


def unit_ids_marked(unit: SsmlUnit, voice: VoiceConfig) -> tuple[list[int], TokenMarks]:
    """``unit_ids`` and the marks of the unit's tokens (``timings.token_marks``); a unit with nothing
    speakable gets ``pause_ids`` and marks at its start."""
    tokens = unit.text.split()
    if unit.phonemes is not None:
        ids = ipa_ids(unit.phonemes, voice)
        return ids, spread_marks(tokens, 1, max(len(ids) - 1, 1))
    phonemes = _phoneme_list(unit.text, voice)
    if not phonemes:
        return pause_ids(voice), TokenMarks([1] * (2 * len(tokens)))
    return token_marks(tokens, phonemes, voice.phoneme_id_map, lambda token: "".join(_phoneme_list(token, voice)))


def pause_ids(voice: VoiceConfig) -> list[int]:
    """Ids for a unit with nothing to say (punctuation only, or SSML's pause before any words): a short
    silence, so that the stream's indices stay whole."""
    return phoneme_ids(".", voice) or [0]
