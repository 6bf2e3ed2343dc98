"""SSML for speech: a test per element, per say-as reader and per refusal (text/ssml.py, text/say_as.py), and
the text work of a request (text/phonemes.py ``prepare``) on the bundled voice."""

from __future__ import annotations

import pickle
import unicodedata

import pytest

from voxlane.config import default_voice_paths
from voxlane.text.phonemes import ipa_ids, phoneme_ids, prepare
from voxlane.text.say_as import INTERPRETERS
from voxlane.text.sentences import split_units
from voxlane.text.ssml import MAX_DEPTH, PARAGRAPH_PAUSE_S, STRENGTH_S, SsmlError, SsmlUnit, is_ssml, parse_ssml
from voxlane.voice_config import load_voice_config


def speak(body: str) -> list[SsmlUnit]:
    return parse_ssml(f"<speak>{body}</speak>")


def test_only_input_that_starts_with_speak_is_ssml() -> None:
    assert is_ssml('  \n<speak version="1.0">Hi</speak>')
    assert is_ssml('<?xml version="1.0"?><speak>Hi</speak>')
    assert is_ssml("<!DOCTYPE speak><speak>Hi</speak>")  # to be refused, not read aloud
    assert not is_ssml("Say <speak> aloud.")
    assert not is_ssml("<p>Hi</p>")


def test_markup_is_never_read_aloud() -> None:
    units = parse_ssml('<speak version="1.0" xml:lang="en-US">One two three. <break time="1500ms"/> Four.</speak>')
    assert [u.text for u in units] == ["One two three.", "Four."]
    assert not any("speak" in u.text or "break" in u.text for u in units)


def test_predefined_entities_and_character_references_resolve() -> None:
    assert speak("Salt &amp; pepper &lt;3 &#65;") == [SsmlUnit("Salt & pepper <3 A")]


@pytest.mark.parametrize(
    ("attrs", "pause_s"),
    [('time="1500ms"', 1.5), ('time="2s"', 2.0), ('time=" 0.25s "', 0.25), ("", STRENGTH_S["medium"])]
    + [(f'strength="{s}"', STRENGTH_S[s]) for s in STRENGTH_S if s != "none"],
)
def test_break_ends_the_unit_with_its_silence(attrs: str, pause_s: float) -> None:
    assert speak(f"One. <break {attrs}/> Two.") == [SsmlUnit("One.", pause_s), SsmlUnit("Two.")]


def test_break_time_wins_over_strength_and_documented_strengths_grow() -> None:
    assert speak('a <break time="300ms" strength="x-strong"/> b')[0].pause_after_s == 0.3
    assert list(STRENGTH_S.values()) == sorted(STRENGTH_S.values())


@pytest.mark.parametrize("attrs", ['strength="none"', 'time="0ms"'])
def test_a_break_of_nothing_is_no_boundary(attrs: str) -> None:
    assert speak(f"one <break {attrs}/> two") == [SsmlUnit("one two")]


def test_breaks_in_a_row_add_up_and_a_leading_one_is_a_silent_unit() -> None:
    assert speak('<break time="1s"/>Hi. <break time="1s"/><break strength="weak"/>') == [
        SsmlUnit("", 1.0),
        SsmlUnit("Hi.", 1.5),
    ]


def test_paragraphs_and_sentences_are_unit_boundaries() -> None:
    assert speak("Intro <p><s>First one</s><s>Second one</s></p><p>Next paragraph</p> end") == [
        SsmlUnit("Intro"),
        SsmlUnit("First one"),
        SsmlUnit("Second one", PARAGRAPH_PAUSE_S),
        SsmlUnit("Next paragraph", PARAGRAPH_PAUSE_S),
        SsmlUnit("end"),
    ]


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        ("x-slow", 0.5),
        ("slow", 0.75),
        ("medium", 1.0),
        ("fast", 1.25),
        ("x-fast", 1.5),
        ("150%", 1.5),
        ("+20%", 1.2),
        ("-20%", 0.8),
    ],
)
def test_prosody_rate_is_the_units_rate(rate: str, expected: float) -> None:
    units = speak(f'Before <prosody rate="{rate}">inside</prosody> after')
    if expected == 1.0:
        assert units == [SsmlUnit("Before inside after")]
    else:
        assert units == [SsmlUnit("Before"), SsmlUnit("inside", rate=expected), SsmlUnit("after")]


def test_nested_prosody_rates_multiply_and_pitch_and_volume_are_accepted() -> None:
    units = speak('<prosody rate="slow">a <prosody rate="200%" pitch="+2st" volume="loud">b</prosody></prosody>')
    assert units == [SsmlUnit("a", rate=0.75), SsmlUnit("b", rate=1.5)]
    assert speak('x <prosody pitch="high" volume="-6dB">y</prosody> z') == [SsmlUnit("x y z")]


@pytest.mark.parametrize(
    ("interpret_as", "text", "fmt", "words"),
    [
        ("characters", "AB1", "", "ay bee one"),
        ("spell-out", "a@b.c", "", "ay at bee dot see"),
        ("cardinal", "1,234", "", "one thousand two hundred thirty four"),
        ("cardinal", "-3.05", "", "minus three point zero five"),
        ("cardinal", "0", "", "zero"),
        ("cardinal", "2000000", "", "two million"),
        ("ordinal", "1st", "", "first"),
        ("ordinal", "22", "", "twenty second"),
        ("ordinal", "40", "", "fortieth"),
        ("ordinal", "112", "", "one hundred twelfth"),
        ("digits", "0042", "", "zero zero four two"),
        ("date", "2024-03-05", "", "March fifth, twenty twenty four"),
        ("date", "05/03/1999", "dmy", "March fifth, nineteen ninety nine"),
        ("date", "3/5", "md", "March fifth"),
        ("date", "1905", "y", "nineteen oh five"),
        ("date", "Dec 2005", "my", "December, two thousand five"),
        ("time", "9:05", "", "nine oh five"),
        ("time", "14:00", "", "fourteen hundred"),
        ("time", "10:30 pm", "", "ten thirty p m"),
        ("time", "7 a.m.", "", "seven a m"),
        ("telephone", "+1 (555) 123-4567", "", "plus one, five five five, one two three, four five six seven"),
    ],
)
def test_say_as_reads_plain_words(interpret_as: str, text: str, fmt: str, words: str) -> None:
    fmt_attr = f' format="{fmt}"' if fmt else ""
    assert speak(f'Say <say-as interpret-as="{interpret_as}"{fmt_attr}>{text}</say-as>.') == [SsmlUnit(f"Say {words}.")]


def test_every_say_as_reader_has_a_case_above() -> None:
    assert set(INTERPRETERS) == {
        "characters",
        "spell-out",
        "cardinal",
        "ordinal",
        "digits",
        "date",
        "time",
        "telephone",
    }


def test_sub_says_its_alias_and_emphasis_reads_as_text() -> None:
    assert speak('The <sub alias="World Wide Web">WWW</sub> is <emphasis level="strong">big</emphasis>.') == [
        SsmlUnit("The World Wide Web is big.")
    ]


def test_phoneme_is_a_unit_of_its_own_spoken_from_its_ipa() -> None:
    assert speak('I say <phoneme alphabet="ipa" ph="təˈmɑːtoʊ">tomato</phoneme> today.') == [
        SsmlUnit("I say"),
        SsmlUnit("tomato", phonemes="təˈmɑːtoʊ"),
        SsmlUnit("today."),
    ]


def error_of(ssml: str) -> str:
    with pytest.raises(SsmlError) as caught:
        parse_ssml(ssml)
    return str(caught.value)


@pytest.mark.parametrize(
    ("ssml", "position", "hint"),
    [
        ("<speak>One <break></speak>", "line 1, column 21", "well-formed"),  # malformed: unclosed tag
        ("<speak>One &nbsp; two</speak>", "line 1, column 12", "&amp;"),  # an entity XML does not define
        ("<speak>\n  Hi <audio src='x.wav'/></speak>", "line 2, column 6", "the elements allowed are break, emphasis"),
        ("<speak><ssml:break/></speak>", "line 1, column 8", "not supported"),
        ("<speak><break duration='1s'/></speak>", "line 1, column 8", "its attributes are strength, time"),
        ("<speak><break time='1 minute'/></speak>", "line 1, column 8", "500ms, 1.5s"),
        ("<speak><break time='11s'/></speak>", "line 1, column 8", "over 10 s"),
        ("<speak><break strength='huge'/></speak>", "line 1, column 8", "none, x-weak, weak, medium"),
        ("<speak><prosody rate='warp'>a</prosody></speak>", "line 1, column 8", "x-slow, slow, medium"),
        ("<speak><prosody rate='1000%'>a</prosody></speak>", "line 1, column 8", "from 0.25 to 4"),
        ("<speak><say-as interpret-as='verbatim'>a</say-as></speak>", "line 1, column 8", "cardinal, characters"),
        ("<speak>\n<say-as interpret-as='cardinal'>ten</say-as></speak>", "line 2, column 1", "send digits"),
        ("<speak><say-as interpret-as='date' format='ymd'>5 March</say-as></speak>", "line 1, column 8", "ymd"),
        ("<speak><say-as interpret-as='time'>25:00</say-as></speak>", "line 1, column 8", "hh:mm"),
        ("<speak><sub>WWW</sub></speak>", "line 1, column 8", "alias"),
        ("<speak><sub alias='x'><break/></sub></speak>", "line 1, column 23", "holds text only"),
        ("<speak><phoneme alphabet='x-sampa' ph='a'>a</phoneme></speak>", "line 1, column 8", "alphabet='ipa'"),
        ("<speak><phoneme alphabet='ipa'>a</phoneme></speak>", "line 1, column 8", "ph attribute"),
        ("<p>Hi</p>", "line 1, column 1", "one <speak> element"),
        ("<speak><speak>Hi</speak></speak>", "line 1, column 8", "one <speak> element"),
        ("<speak>Hi</speak> trailing", "line 1, column 19", "well-formed"),
    ],
)
def test_bad_markup_is_refused_with_its_position_and_what_is_allowed(ssml: str, position: str, hint: str) -> None:
    message = error_of(ssml)
    assert position in message and hint in message, message


def test_doctype_and_entity_declarations_are_refused() -> None:
    laughs = '<!DOCTYPE speak [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;">]><speak>&b;</speak>'
    assert "DOCTYPE is not allowed" in error_of(laughs)
    assert "DOCTYPE is not allowed" in error_of('<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>x</speak>')
    assert "DOCTYPE is not allowed" in error_of("<!DOCTYPE speak><speak>x</speak>")
    assert parse_ssml('<?xml version="1.0" encoding="UTF-8"?>\n<speak>x</speak>') == [SsmlUnit("x")]


def test_nesting_deeper_than_the_bound_is_refused() -> None:
    ok = "<emphasis>" * (MAX_DEPTH - 1) + "deep" + "</emphasis>" * (MAX_DEPTH - 1)
    assert speak(ok) == [SsmlUnit("deep")]
    too_deep = "<emphasis>" * MAX_DEPTH + "deep" + "</emphasis>" * MAX_DEPTH
    assert f"nest deeper than {MAX_DEPTH}" in error_of(f"<speak>{too_deep}</speak>")


def test_the_error_survives_the_trip_back_from_the_text_worker_process() -> None:
    error = pickle.loads(pickle.dumps(SsmlError("SSML error at line 1, column 2: x")))
    assert isinstance(error, SsmlError) and str(error) == "SSML error at line 1, column 2: x"


# --- the request's text work on the bundled voice ---------------------------------------------------


@pytest.fixture(scope="module")
def config_path() -> str:
    return default_voice_paths()[1]


def test_plain_text_is_prepared_as_before(config_path: str) -> None:
    text = "The weather today is sunny with a light breeze. Later it rains, they say."
    voice, units, first_ids = prepare(text, config_path)
    assert units == [SsmlUnit(u) for u in split_units(text)]
    assert first_ids == phoneme_ids(units[0].text, voice)
    # Markup-like text that does not start with <speak is read as text, as it always was.
    assert prepare("Say <break/> please.", config_path)[1][0].text.startswith("Say <break/>")


def test_ssml_units_are_split_like_text_and_keep_their_pause_and_rate(config_path: str) -> None:
    long = "The old lighthouse stood at the edge of the cliff, watching over the harbour."
    _, units, _ = prepare(f'<speak><prosody rate="slow">{long}</prosody><break time="2s"/>End.</speak>', config_path)
    assert [u.text for u in units[:-1]] == split_units(long)
    assert all(u.rate == 0.75 for u in units[:-1])
    assert [u.pause_after_s for u in units] == [0.0] * (len(units) - 2) + [2.0, 0.0]


def test_a_leading_break_is_a_silent_first_unit_and_markup_alone_has_nothing_to_say(config_path: str) -> None:
    _, units, first_ids = prepare('<speak><break time="1s"/>Hello.</speak>', config_path)
    assert units[0] == SsmlUnit("", 1.0) and first_ids
    assert prepare('<speak><break time="1s"/></speak>', config_path)[1:] == ([], [])


def test_phoneme_ipa_becomes_the_voices_ids_and_unknown_symbols_are_refused(config_path: str) -> None:
    voice = load_voice_config(config_path)
    symbol_of = {i: s for s, ids in voice.phoneme_id_map.items() for i in ids}
    spoken = [symbol_of[i] for i in ipa_ids("təˈmɑːtoʊ", voice)]
    assert spoken[:2] == ["^", "_"] and spoken[-1] == "$"  # Piper's start, pads and end, as for espeak's
    assert [s for s in spoken if s not in "^_$"] == list(unicodedata.normalize("NFD", "təˈmɑːtoʊ"))
    with pytest.raises(SsmlError, match="cannot say: ☃"):
        prepare('<speak>A <phoneme alphabet="ipa" ph="t☃">t</phoneme>.</speak>', config_path)
