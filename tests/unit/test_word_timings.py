"""Word timings' text side (text/timings.py): the input's words tied to spoken tokens, tokens tied to phoneme
ids, and the arithmetic that turns the engine's sample offsets into seconds of the stream. Pure functions,
plus the bundled voice's espeak for the ids a real unit gets."""

from __future__ import annotations

import pytest

from voxlane.config import default_voice_paths
from voxlane.text.phonemes import prepare_timed, unit_ids, unit_ids_marked
from voxlane.text.ssml import SsmlUnit
from voxlane.text.timings import (
    PlannedWord,
    Segment,
    WordTime,
    ids_and_starts,
    plan_words,
    token_marks,
    unit_marks_s,
    word_times,
)
from voxlane.voice_config import load_voice_config

# A toy voice: each symbol one id, pad 0, BOS 1, EOS 2.
ID_MAP = {"_": [0], "^": [1], "$": [2], " ": [3], ",": [4], ".": [5]} | {
    c: [10 + i] for i, c in enumerate("abcdefghijklmnopqrstuvwxyzðəɪˈ")
}


def spans_of(tokens: list[str], marks: list[int]) -> dict[str, tuple[int, int]]:
    return {t: (marks[2 * k], marks[2 * k + 1]) for k, t in enumerate(tokens)}


def test_ids_are_pipers_and_each_phoneme_knows_where_its_ids_start() -> None:
    from piper.phoneme_ids import phonemes_to_ids

    phonemes = list("ab c?")  # '?' is not in the map: skipped, as Piper skips it
    ids, starts = ids_and_starts(phonemes, ID_MAP)
    assert ids == phonemes_to_ids(phonemes, ID_MAP)
    assert starts == [2, 4, 6, 8, -1]
    assert [ids[s] for s in starts if s >= 0] == [10, 11, 3, 12]


def test_tokens_pair_with_ipa_words_in_order_when_their_counts_agree() -> None:
    tokens = ["Hello,", "big", "world."]
    phonemes = list("hələʊ, bɪɡ wɜld.".replace("ʊ", "u").replace("ɡ", "g").replace("ɜ", "e"))
    _, marks = token_marks(tokens, phonemes, ID_MAP, lambda t: "")
    spans = spans_of(tokens, marks.marks)
    # "hələu" is 5 phonemes from id 2, each followed by its pad: ids 2..11, the comma and space excluded.
    assert spans["Hello,"] == (2, 12)
    assert spans["big"][0] > spans["Hello,"][1]  # the comma and the space lie between them
    ids = ids_and_starts(phonemes, ID_MAP)[0]
    assert spans["world."][1] == len(ids) - 3  # the full stop (its id, its pad, EOS) is no part of it
    assert marks.interpolated == 0


def test_a_joined_ipa_word_is_cut_among_its_tokens_by_their_own_length() -> None:
    # espeak writes "in the" as one word, "ɪnðə"; alone they are "ɪn" and "ðə".
    tokens = ["sat", "in", "the", "sun"]
    phonemes = list("sat ɪnðə sun")
    refs = {"sat": "sat", "in": "ɪn", "the": "ðə", "sun": "sun"}
    _, marks = token_marks(tokens, phonemes, ID_MAP, refs.__getitem__)
    spans = spans_of(tokens, marks.marks)
    starts = ids_and_starts(phonemes, ID_MAP)[1]
    n_start, th_start = starts[phonemes.index("n")], starts[phonemes.index("ð")]
    assert spans["in"] == (starts[4], n_start + 2)
    assert spans["the"] == (th_start, starts[7] + 2)
    assert spans["sun"][0] == starts[9]  # the words after the joined one keep their own
    assert marks.interpolated == 2


def test_a_token_that_is_no_word_takes_no_time() -> None:
    tokens = ["yes", "-", "no"]
    _, marks = token_marks(tokens, list("yes, no"), ID_MAP, lambda t: t)
    spans = spans_of(tokens, marks.marks)
    assert spans["-"][0] == spans["-"][1] == spans["yes"][1]


def test_written_words_keep_their_spelling_and_span_what_they_became() -> None:
    units = ["Doctor Smith paid", "five dollars, then left."]
    plan = plan_words([Segment("Dr. Smith paid $5, then left.", 0, 2)], units)
    assert [w.word for w in plan] == ["Dr", "Smith", "paid", "$5", "then", "left"]
    five = plan[3]
    assert five.first == (1, 0) and five.last == (1, 3)  # "five" starts it, "dollars," ends it
    assert plan[0].first == (0, 0) and plan[4].first == (1, 4)
    assert not any(w.spread for w in plan)


def test_punctuation_only_tokens_are_not_words() -> None:
    plan = plan_words([Segment('"Go" - now !', 0, 1)], ['"Go" - now !'])
    assert [w.word for w in plan] == ["Go", "now"]


def test_several_written_words_for_other_spoken_ones_share_the_group_by_length() -> None:
    plan = plan_words([Segment("at 5pm sharp", 0, 1)], ["at five PM o'clock sharp"])
    five = [w for w in plan if w.word == "5pm"]
    assert len(five) == 1 and five[0].first == (0, 2) and five[0].last == (0, 7)
    spread = plan_words([Segment("ab cdef", 0, 1)], ["x y z"])
    assert [(w.word, w.share, w.spread) for w in spread] == [
        ("ab", (0.0, 1 / 3), True),
        ("cdef", (1 / 3, 1.0), True),
    ]


def test_word_times_add_each_units_offset_and_wait_for_its_units() -> None:
    plan = [
        PlannedWord("one", (0, 0), (0, 1)),
        PlannedWord("two", (1, 0), (1, 1)),
        PlannedWord("three", (1, 2), (2, 1)),
    ]
    rate = 1000
    marks_s = {0: unit_marks_s(0.0, [100, 400], rate), 1: unit_marks_s(1.5, [50, 300, 350, 600], rate)}
    assert word_times(plan, 0, marks_s) == [WordTime("one", 0.1, 0.4), WordTime("two", 1.55, 1.8)]
    marks_s[2] = unit_marks_s(3.0, [10, 200], rate)
    assert word_times(plan, 2, marks_s) == [WordTime("three", 1.85, 3.2)]
    shared = PlannedWord("half", (0, 0), (0, 1), share=(0.5, 1.0))
    assert word_times([shared], 0, {0: [1.0, 2.0]}) == [WordTime("half", 1.5, 2.0)]


@pytest.fixture(scope="module")
def config_path() -> str:
    return default_voice_paths()[1]


def test_marked_ids_are_the_ids_the_unit_is_spoken_from(config_path: str) -> None:
    voice = load_voice_config(config_path)
    for text in ("It was the age of wisdom, it was the age of foolishness.", "Hello.", "..."):
        unit = SsmlUnit(text)
        ids, marks = unit_ids_marked(unit, voice)
        assert ids == (unit_ids(unit, voice) or ids)
        assert len(marks.marks) == 2 * len(text.split())
        assert marks.marks == sorted(marks.marks)  # in order, each word after the one before


def test_ssml_sub_and_say_as_words_are_the_markup_text(config_path: str) -> None:
    ssml = (
        '<speak>See the <sub alias="World Wide Web">WWW</sub>.<break time="1s"/>'
        'Spell <say-as interpret-as="characters">abc</say-as> now.</speak>'
    )
    _, units, _, _, plan = prepare_timed(ssml, config_path)
    assert [w.word for w in plan] == ["See", "the", "WWW", "Spell", "abc", "now"]
    www = plan[2]
    assert units[www.first[0]].text.split()[www.first[1] // 2] == "World"
    assert units[www.last[0]].text.split()[www.last[1] // 2].startswith("Web")
    assert plan[3].first[0] > www.last[0]  # after the break: a later unit


def test_only_a_graph_with_one_ceil_tensor_is_patched_for_alignment(tmp_path) -> None:
    import onnx
    from onnx import TensorProto, helper

    from voxlane.runners.piper import _with_alignment

    model, aligned = _with_alignment(default_voice_paths()[0])
    assert aligned and isinstance(model, bytes)
    assert [o.name for o in onnx.load_from_string(model).graph.output][1:] == ["/Ceil_output_0"]

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "no-ceil", [x], [y])
    path = tmp_path / "no-ceil.onnx"
    onnx.save(helper.make_model(graph), path)
    assert _with_alignment(str(path)) == (str(path), False)  # served as it is, without timings
