"""Diarization through the official openai client against the real server: a synthetic
two-speaker conversation of dev-set speakers (voxlane/bench/conversations.py) gets its two speakers and its
turns, known speakers get their names, the stream sends segment events, and every bad input is a 400."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from tests.conftest import DEV_DIR, metric
from voxlane.bench.conversations import Conversation, build, load_pieces, wav_bytes
from voxlane.bench.diarize import der, named_right
from voxlane.bench.hard_conversations import build_hard

DER_BOUND = 0.10
"""The bound on the mean DER without overlap. This conversation (seed 2, 41.5 s) measured 0.0%; over
the 40 s two-speaker conversations of seeds 1-8, DER was 0-9.7% and seed 8's two speakers were found as one
(29.1%; docs/diarization.md): one file is not the mean."""


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    speakers = load_pieces(DEV_DIR)
    return build(speakers, 1, seed=2, known=True, max_s=40.0, n_speakers=2)[0]


def _file(conv: Conversation) -> tuple[str, bytes, str]:
    return ("conversation.wav", wav_bytes(conv.pcm), "audio/wav")


def _data_url(pcm: np.ndarray, fmt: str = "WAV") -> str:
    buf = io.BytesIO()
    sf.write(buf, pcm, 16000, format=fmt)
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode()


def test_two_speakers_and_their_turns(client, conversation) -> None:
    result = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize", file=_file(conversation), response_format="diarized_json"
    )
    speakers = [s.speaker for s in result.segments]
    assert list(dict.fromkeys(speakers)) == ["A", "B"]  # letters in order of first appearance
    assert all(s.type == "transcript.text.segment" and s.text and s.start < s.end for s in result.segments)
    assert result.text and abs(result.duration - conversation.duration_s) < 0.05
    score = der(conversation, [s.model_dump() for s in result.segments])
    assert score["der"] <= DER_BOUND, score


def _with_known_speakers(client, conv: Conversation) -> list[dict]:
    """The segments of ``conv`` diarized with its known speakers' clips, after checking that each segment is
    one of their names and at least 90% are the right one."""
    names = sorted(conv.references)
    result = client.audio.transcriptions.create(
        model="whisper-1",
        file=_file(conv),
        response_format="diarized_json",
        known_speaker_names=names,
        known_speaker_references=[_data_url(conv.references[n]) for n in names],
    )
    segments = [s.model_dump() for s in result.segments]
    assert {s["speaker"] for s in segments} == set(names)
    right, total = named_right(conv, segments)
    assert right >= 0.9 * total
    return segments


def test_known_speakers_are_named(client, conversation) -> None:
    _with_known_speakers(client, conversation)


def test_stream_sends_a_segment_event_each_then_done(client, conversation) -> None:
    events = list(
        client.audio.transcriptions.create(
            model="gpt-4o-transcribe-diarize", file=_file(conversation), response_format="diarized_json", stream=True
        )
    )
    assert [e.type for e in events[:-1]] == ["transcript.text.segment"] * (len(events) - 1)
    assert len(events) > 2 and events[-1].type == "transcript.text.done"
    assert {e.speaker for e in events[:-1]} == {"A", "B"}
    assert events[-1].text.startswith(events[0].text.strip()[:10])


def _bad(client, conv: Conversation, names: list[str], refs: list[str]) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as err:
        client.audio.transcriptions.create(
            model="whisper-1",
            file=_file(conv),
            response_format="diarized_json",
            known_speaker_names=names,
            known_speaker_references=refs,
        )
    return err.value


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param("undecodable", "not audio that can be decoded", id="undecodable"),
        pytest.param("not_a_data_url", "not a base64 data URL", id="not_a_data_url"),
        pytest.param("too_short", "holds 1.00 s of audio", id="too_short"),
        pytest.param("too_long", "longer than 10 s", id="too_long"),
        pytest.param("unpaired", "send one reference clip (a data URL) for each name", id="unpaired"),
        pytest.param("five", "send at most 4", id="five"),
    ],
)
def test_bad_known_speakers_are_400s(client, conversation, case, expected) -> None:
    pcm = conversation.references[sorted(conversation.references)[0]]
    refs = {
        "undecodable": ["data:audio/wav;base64," + base64.b64encode(b"RIFF not really a wav file").decode()],
        "not_a_data_url": ["https://example.com/voice.wav"],
        "too_short": [_data_url(pcm[:16000])],
        "too_long": [_data_url(np.tile(pcm, 3)[: 12 * 16000])],
        "unpaired": [_data_url(pcm)],
        "five": [_data_url(pcm)] * 5,
    }[case]
    names = {"unpaired": ["agent", "customer"], "five": list("vwxyz")}.get(case, ["agent"])
    error = _bad(client, conversation, names, refs)
    body = error.body if isinstance(error.body, dict) else {}
    assert expected in str(body.get("message")), body
    assert "send" in str(body.get("message"))


def test_known_speakers_need_diarized_json(client, conversation) -> None:
    with pytest.raises(openai.BadRequestError, match="diarized_json"):
        client.audio.transcriptions.create(
            model="whisper-1", file=_file(conversation), known_speaker_names=["agent"], known_speaker_references=["x"]
        )


def test_without_the_weights_diarized_json_is_a_400_that_says_what_to_install(conversation, tmp_path: Path) -> None:
    from openai import OpenAI

    from tests.conftest import running_server

    with running_server("--speaker-model", str(tmp_path / "missing.npz")) as srv:
        client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        with pytest.raises(openai.BadRequestError, match=r"python -m voxlane\.speakers\.weights"):
            client.audio.transcriptions.create(
                model="whisper-1", file=_file(conversation), response_format="diarized_json"
            )
        plain = client.audio.transcriptions.create(model="whisper-1", file=_file(conversation))
        assert plain.text  # the server still transcribes


def test_campplus_as_the_regions_encoder_gets_the_filterbanks(conversation) -> None:
    # The API process computes a window's filterbanks only for an engine whose regions' encoder reads them:
    # with CAM++ (and its thresholds) both speakers are found and the known ones named from their clips.
    from openai import OpenAI

    from tests.conftest import running_server

    args = ("--speaker-model", "campplus", "--diarize-threshold", "0.45", "--diarize-merge-threshold", "0.6")
    with running_server(*args) as srv:
        client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        segments = _with_known_speakers(client, conversation)
    assert der(conversation, segments)["der"] <= DER_BOUND


def test_the_count_check_finds_five_speakers_where_the_embeddings_found_three(server, client) -> None:
    # The hard set's hard19 (seed 1): five speakers, two pairs of them alike enough that the regions'
    # embeddings cluster them as three (DER 19.3%); the count step's candidates, heard whole by CAM++, are
    # two more speakers, then a third is a part of one voice; one speaker's two-means halves have stretches
    # too alike by GE2E (SPLIT_ALIKE) to be heard (5 found, DER 7.0%; docs/diarization.md). Whisper's words
    # there move with the host's int8
    # kernels: on another 2-core host some speech around its pauses is missed or overrun (13.1%, of which
    # 1.4% confusion), so the bound is the hard set's for any conversation.
    conv = _hard(1, "hard19-5spk")
    checks = _found(server, client, conv, 5, bound=0.15)
    assert checks == {
        ("merge", "speaker"): 0,
        ("merge", "same"): 0,
        ("add", "speaker"): 2,
        ("add", "same"): 1,
        ("split", "speaker"): 0,
        ("split", "same"): 0,
        ("regions", "speaker"): 0,
        ("regions", "same"): 0,
    }


def test_a_speaker_heard_as_two_voices_is_split(server, client) -> None:
    # The default set's conv05 (seed 0): four speakers, two of them clustered as one and the count step's
    # candidate a stray part of one voice (3 found, DER 13.6%); that speaker's halves, heard whole, are two
    # voices (4 found, DER 6.4%; docs/diarization.md).
    conv = next(c for c in build(load_pieces(DEV_DIR), 15, 0, known=True) if c.name == "conv05-4spk")
    checks = _found(server, client, conv, 4)
    assert checks[("split", "speaker")] == 1


def test_a_speaker_with_little_speech_that_sounds_like_its_nearest_is_merged(server, client) -> None:
    # The hard set's hard02 (seed 1): two alike high voices; the clustering keeps 5 s of one of them as a
    # third speaker (3 found, DER 7.1%); heard whole against its nearest speakers, it is one of theirs (2
    # found, DER 2.9%; docs/diarization.md).
    conv = _hard(1, "hard02-2spk")
    checks = _found(server, client, conv, 2)
    assert checks[("merge", "same")] == 1


def test_two_alike_voices_clustered_as_one_are_split_by_two_means(server, client) -> None:
    # The hard set's hard03 (seed 5): two low voices (110 and 125 Hz) clustered as one speaker, whose
    # clustering cut at two splits off a stray part (1 found, DER 51.9%); cut by two-means, its halves are
    # the two voices, heard apart (2 found, DER 7.3%; docs/diarization.md).
    conv = _hard(5, "hard03-2spk")
    checks = _found(server, client, conv, 2)
    assert checks[("split", "speaker")] == 1


def test_two_alike_voices_whose_two_means_halves_meet_at_0821_are_split(server, client) -> None:
    # The hard set's hard17 (seed 3): two low voices (110 and 125 Hz) clustered as one speaker, whose
    # two-means halves meet at 0.821, under TWO_MEANS_SIMILARITY, and are heard apart (5 found, DER 4.4%;
    # 4 and 19.7% with the gate at 0.82; docs/diarization.md).
    conv = _hard(3, "hard17-5spk")
    checks = _found(server, client, conv, 5)
    assert checks[("split", "speaker")] == 1


def test_a_split_its_stretches_leave_unsure_is_two_where_its_regions_sound_apart(server, client) -> None:
    # The hard set's hard16 (seed 6): two high voices (193 and 211 Hz) clustered as one speaker; its halves'
    # 4 s stretches meet at 0.54, between CHECK_DIFFERENT and CHECK_SAME, so each of its regions is heard
    # alone, and the two groups they fall into sound apart (5 found, DER 5.6%; 4 and 13.1% on the stretches
    # alone; docs/diarization.md).
    conv = _hard(6, "hard16-5spk")
    checks = _found(server, client, conv, 5)
    assert checks[("regions", "speaker")] == 1


def test_a_split_its_stretches_leave_unsure_is_one_voice_where_its_regions_sound_alike(server, client) -> None:
    # The hard set's hard04 (seed 1): two high voices, each found; one's halves meet at 0.51 on their
    # stretches, and its regions, heard alone, sound like one voice (2 found, not 3).
    conv = _hard(1, "hard04-2spk")
    checks = _found(server, client, conv, 2)
    assert checks[("regions", "same")] == 1


def test_a_split_speakers_halves_are_redrawn_from_its_stretches(server, client) -> None:
    # The hard set's hard21 (seed 2): 0157's 4.2 s inside 2327's speaker; two-means cuts it with 5.3 s of
    # 2327 on 0157's side, and the split, heard apart, gives each region to the nearer of its two stretches
    # (6 found, DER 8.9%; 15.8% with two-means' halves; docs/diarization.md).
    conv = _hard(2, "hard21-6spk")
    checks = _found(server, client, conv, 6)
    assert checks[("split", "speaker")] >= 1


def test_speech_whose_words_whisper_skipped_is_read_again(client) -> None:
    # The hard set's hard22 (seed 2): tiny.en read its first window's first segment from 0.0 s to 20.1 s,
    # whose six words end at 3.6 s, over one speaker's three turns (11.9 s), and the continuation after the
    # segment lost them (DER 23.2%). From the last word before the skipped speech they are read, in
    # diarized_json and in verbose_json's words alike.
    conv = _hard(2, "hard22-6spk")
    result = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize", file=_file(conv), response_format="diarized_json"
    )
    segments = [s.model_dump() for s in result.segments]
    assert "picture was rated acceptable" in " ".join(s["text"] for s in segments if s["end"] <= 17.0)
    assert der(conv, segments)["der"] <= 0.15
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=_file(conv), response_format="verbose_json", timestamp_granularities=["word"]
    )
    assert any(w.word.strip() == "picture" and 3.6 <= w.start <= 8.9 for w in verbose.words or [])


def test_without_the_check_encoders_weights_the_count_comes_from_the_embeddings(tmp_path: Path) -> None:
    # The engine warns and diarizes on: hard19's alike voices stay merged (3 of 5), and nothing is checked.
    from openai import OpenAI

    from tests.conftest import running_server

    conv = _hard(1, "hard19-5spk")
    with running_server("--speaker-check-model", str(tmp_path / "missing.npz")) as srv:
        client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        result = client.audio.transcriptions.create(
            model="whisper-1", file=_file(conv), response_format="diarized_json"
        )
        assert len({s.speaker for s in result.segments}) == 3
        text = httpx.get(srv.base_url + "/metrics", timeout=10).text
        assert sum(_checks(text, step, v) for step in ("merge", "add", "split") for v in ("speaker", "same")) == 0


def _hard(seed: int, name: str) -> Conversation:
    """The hard set's conversation ``name`` of ``seed``."""
    return next(c for c in build_hard(load_pieces(DEV_DIR), seed) if c.name == name)


def _found(server, client, conv: Conversation, speakers: int, bound: float = DER_BOUND) -> dict[tuple[str, str], float]:
    """One diarized transcription of ``conv``, which must find ``speakers`` speakers with DER under
    ``bound``: the count checks' verdicts it added to /metrics, by (step, verdict)."""
    before = httpx.get(server.base_url + "/metrics", timeout=10).text
    result = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize", file=_file(conv), response_format="diarized_json"
    )
    after = httpx.get(server.base_url + "/metrics", timeout=10).text
    segments = [s.model_dump() for s in result.segments]
    assert len({s["speaker"] for s in segments}) == speakers
    assert der(conv, segments)["der"] <= bound
    return {
        (step, v): _checks(after, step, v) - _checks(before, step, v)
        for step in ("merge", "add", "split", "regions")
        for v in ("speaker", "same")
    }


def _checks(metrics_text: str, step: str, verdict: str) -> float:
    try:
        return metric(metrics_text, "voxlane_speaker_count_checks_total", step=step, verdict=verdict)
    except KeyError:  # no check with that verdict yet
        return 0.0


def _speakers(client, conv: Conversation, **hints: int) -> list[str]:
    result = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize", file=_file(conv), response_format="diarized_json", extra_body=hints
    )
    return sorted({s.speaker for s in result.segments})


def test_num_speakers_sets_the_count(client, conversation) -> None:
    # The two-speaker conversation is found with two on its own (the first test); the hint overrides that.
    assert _speakers(client, conversation, num_speakers=1) == ["A"]
    assert _speakers(client, conversation, num_speakers=3) == ["A", "B", "C"]


def test_min_and_max_speakers_clamp_the_count(client, conversation) -> None:
    assert _speakers(client, conversation, min_speakers=3, max_speakers=5) == ["A", "B", "C"]
    assert _speakers(client, conversation, max_speakers=1) == ["A"]


def _rttm_turns(body: str) -> list[dict]:
    turns = []
    for line in body.splitlines():
        fields = line.split(" ")
        assert len(fields) == 10 and fields[0] == "SPEAKER" and fields[2] == "1", line
        assert fields[5:7] == ["<NA>", "<NA>"] and fields[8:] == ["<NA>", "<NA>"], line
        assert all(len(f.split(".")[1]) == 3 for f in fields[3:5]), line  # seconds to 3 decimals
        start, duration = float(fields[3]), float(fields[4])
        turns.append({"file": fields[1], "start": start, "end": start + duration, "speaker": fields[7]})
    return turns


def test_rttm_gives_the_speaker_turns_as_nist_lines(client, conversation) -> None:
    raw = client.audio.transcriptions.with_raw_response.create(
        model="gpt-4o-transcribe-diarize",
        file=("two people talking.wav", wav_bytes(conversation.pcm), "audio/wav"),
        response_format="rttm",  # type: ignore[arg-type]  # voxlane's format: the SDK does not list it
        extra_body={"num_speakers": 2},
    )
    assert raw.headers["content-type"].startswith("text/plain")
    turns = _rttm_turns(raw.http_response.text)
    assert {t["file"] for t in turns} == {"two_people_talking"}
    assert {t["speaker"] for t in turns} == {"A", "B"}
    assert der(conversation, turns)["der"] <= DER_BOUND


def _bad_hint(client, conv: Conversation, fmt: str, stream: bool = False, **fields: object) -> dict:
    names = fields.pop("known_speaker_names", [])
    with pytest.raises(openai.BadRequestError) as err:
        client.audio.transcriptions.create(
            model="whisper-1",
            file=_file(conv),
            response_format=fmt,  # type: ignore[arg-type]
            stream=stream,  # type: ignore[arg-type]
            known_speaker_names=names,  # type: ignore[arg-type]
            known_speaker_references=["data:audio/wav;base64,"] * len(names),  # type: ignore[arg-type]
            extra_body=fields,
        )
    body = err.value.body if isinstance(err.value.body, dict) else {}
    assert "send" in str(body.get("message")), body
    return body


@pytest.mark.parametrize(
    ("fmt", "fields", "param", "expected"),
    [
        pytest.param("json", {"num_speakers": 2}, "num_speakers", "diarized_json", id="not_diarized"),
        pytest.param("diarized_json", {"num_speakers": 0}, "num_speakers", "greater than or equal to 1", id="zero"),
        pytest.param("diarized_json", {"max_speakers": "two"}, "max_speakers", "integer", id="not_a_number"),
        pytest.param("rttm", {"min_speakers": 3, "max_speakers": 2}, "min_speakers", "min_speakers <=", id="min_max"),
        pytest.param("diarized_json", {"num_speakers": 5, "max_speakers": 4}, "num_speakers", "outside", id="outside"),
        pytest.param("diarized_json", {"min_speakers": 17}, "min_speakers", "--diarize-max-speakers", id="limit"),
        pytest.param(
            "diarized_json",
            {"num_speakers": 1, "known_speaker_names": ["agent", "customer"]},
            "num_speakers",
            "known speakers",
            id="known_do_not_fit",
        ),
    ],
)
def test_bad_speaker_counts_are_400s(client, conversation, fmt, fields, param, expected) -> None:
    body = _bad_hint(client, conversation, fmt, **fields)
    assert body.get("param") == param and expected in str(body.get("message")), body


def test_rttm_cannot_stream(client, conversation) -> None:
    body = _bad_hint(client, conversation, "rttm", stream=True)
    assert body.get("param") == "stream" and "rttm is one file" in str(body.get("message")), body
