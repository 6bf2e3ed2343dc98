"""Text for speech: normalisation, sentence and clause splitting, phonemisation, streaming encoders."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from voxlane.audio.encode import SPEECH_FORMATS, StreamEncoder, output_rate
from voxlane.config import default_voice_paths
from voxlane.text.normalise import normalise
from voxlane.text.phonemes import phoneme_ids
from voxlane.text.sentences import cap_clauses, split_long, split_sentences, split_units
from voxlane.voice_config import load_voice_config


def test_normalise_plain_quotes_dashes_and_spaces() -> None:
    assert normalise("“Hi”  —  there\u2026\n\tyou!!!!") == '"Hi", there... you!!'


def test_sentences_keep_abbreviations_and_initials() -> None:
    assert split_sentences("Dr. Smith met J. R. Jones. They talked! Did it work? Yes") == [
        "Dr. Smith met J. R. Jones.",
        "They talked!",
        "Did it work?",
        "Yes",
    ]


def test_long_sentence_is_cut_at_clauses_then_spaces() -> None:
    sentence = ", ".join(["one two three four five"] * 20) + "."
    pieces = split_long(sentence, 60)
    assert all(len(p) <= 60 for p in pieces)
    assert " ".join(pieces).replace("  ", " ") == sentence
    assert all(p.endswith((",", ".")) for p in pieces)  # clause boundaries, not mid-clause
    no_commas = "word " * 100
    assert all(len(p) <= 60 for p in split_long(no_commas.strip(), 60))


def test_very_short_first_unit_is_merged_with_the_next() -> None:
    assert split_units("Hi. Thanks. And a third sentence.") == ["Hi. Thanks.", "And a third sentence."]
    assert split_units("Hello there. Second.") == ["Hello there.", "Second."]


def test_first_sentence_is_cut_short_for_a_quick_first_sound() -> None:
    # 0.5-1 s of audio first (time to first audio), the rest of the sentence next; later sentences whole.
    assert split_units("The weather today is sunny with a light breeze. Later it rains, they say.") == [
        "The weather",
        "today is sunny with a light breeze.",
        "Later it rains, they say.",
    ]
    # The rest of a long first sentence is cut again at about twice the first unit (a ramp).
    assert split_units("The old lighthouse stood at the edge of the cliff, watching over the harbour.") == [
        "The old lighthouse",
        "stood at the edge of the cliff,",
        "watching over the harbour.",
    ]
    # A clause boundary in reach is preferred to a word boundary.
    assert split_units("Well, my friend, the weather today is sunny with a light breeze.")[0] == "Well, my friend,"
    # A first sentence that is short already, or cannot be cut with 8+ characters each side, stays whole.
    assert split_units("Hello there, you.") == ["Hello there, you."]
    assert split_units("Incomprehensibilities abound.") == ["Incomprehensibilities abound."]


def test_units_grow_and_a_long_second_sentence_is_cut_at_a_clause_early_on() -> None:
    text = (
        "Nobody knows. Some say it would chuck as much as it could, while others insist that woodchucks do not "
        "chuck wood at all, and that the question is a joke. It has puzzled children, and their parents, for "
        "more than a hundred years, in every country where the rhyme is known."
    )
    units = split_units(text, clause_chars=300)  # the ramp alone (clause_chars: the next test)
    # A 13-character first unit, then the long second sentence cut at its first comma (no clause of it fits
    # in three times what was spoken) ...
    assert units[:2] == ["Nobody knows.", "Some say it would chuck as much as it could,"]
    # ... then, with more spoken, the rest of that sentence and the next whole: never inside a clause,
    # nothing lost or reordered.
    assert units[2:] == [
        "while others insist that woodchucks do not chuck wood at all, and that the question is a joke.",
        "It has puzzled children, and their parents, for more than a hundred years, in every country where the "
        "rhyme is known.",
    ]
    assert " ".join(units) == text


def test_long_units_are_cut_at_clauses_into_pieces_of_at_most_clause_chars() -> None:
    text = (
        "Nobody knows. Some say it would chuck as much as it could, while others insist that woodchucks do not "
        "chuck wood at all, and that the question is a joke. It has puzzled children, and their parents, for "
        "more than a hundred years, in every country where the rhyme is known."
    )
    units = split_units(text, clause_chars=60)
    assert units == [
        "Nobody knows.",
        "Some say it would chuck as much as it could,",
        "while others insist that woodchucks do not chuck wood at all,",  # one clause of 61: kept whole
        "and that the question is a joke.",
        "It has puzzled children, and their parents,",
        "for more than a hundred years,",
        "in every country where the rhyme is known.",
    ]
    assert " ".join(units) == text  # nothing lost or reordered


def test_a_clause_is_never_cut_and_a_tiny_last_clause_joins_the_one_before() -> None:
    assert cap_clauses(["one two three four five six seven eight nine ten eleven twelve"], 20) == [
        "one two three four five six seven eight nine ten eleven twelve"
    ]
    assert cap_clauses(["a first clause of some length, and a second one, too."], 30) == [
        "a first clause of some length,",
        "and a second one, too.",
    ]
    assert cap_clauses(["a first clause of some length here, ok."], 30) == ["a first clause of some length here, ok."]


def test_first_unit_is_half_a_second_to_a_second_and_a_bit_of_audio() -> None:
    from voxlane.text.sentences import CHARS_PER_SECOND, FIRST_MAX_CHARS, FIRST_MIN_CHARS

    text = (
        "The old lighthouse stood at the edge of the cliff, watching over the harbour. Every night its lamp "
        "turned slowly."
    )
    first = split_units(text)[0]
    assert FIRST_MIN_CHARS <= len(first) <= FIRST_MAX_CHARS
    assert 0.4 <= len(first) / CHARS_PER_SECOND <= 1.2


def test_phoneme_ids_of_the_bundled_voice() -> None:
    voice = load_voice_config(default_voice_paths()[1])
    ids = phoneme_ids("Hello world.", voice)
    assert ids[0] == voice.phoneme_id_map["^"][0] and ids[-1] == voice.phoneme_id_map["$"][0]
    assert len(ids) > 10
    assert phoneme_ids("", voice) == []


def test_opus_rate_is_moved_to_one_it_supports() -> None:
    assert output_rate("opus", 22050, None) == 24000
    assert output_rate("opus", 22050, 44100) == 48000
    assert output_rate("pcm", 22050, None) == 24000  # OpenAI's pcm rate
    assert output_rate("wav", 22050, None) == 22050


@pytest.mark.parametrize("fmt", SPEECH_FORMATS)
def test_encoders_stream_and_decode(fmt: str) -> None:
    rate = 22050
    t = np.arange(rate * 2) / rate
    pcm = (np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16)
    encoder = StreamEncoder(fmt, rate)
    parts = [encoder.encode(pcm[i : i + rate // 2]) for i in range(0, len(pcm), rate // 2)]
    parts.append(encoder.finish())
    assert sum(1 for p in parts[:-1] if p) >= 3, "bytes must come out while audio goes in, not only at the end"
    data = b"".join(parts)
    if fmt == "pcm":
        assert abs(len(data) / 2 / encoder.sample_rate - 2.0) < 0.01
        return
    with av.open(io.BytesIO(data)) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
        decoded_rate = container.streams.audio[0].rate
    assert abs(samples / decoded_rate - 2.0) < 0.1
