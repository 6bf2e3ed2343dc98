"""The realtime session's turn state (server/realtime/turns.py), driven with a fake clock and fake decodes: when a
turn opens, commits and is cut, which decodes start, and what a client is sent."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from voxlane.audio.live import SAMPLE_RATE
from voxlane.errors import InvalidRequest, QueueFull
from voxlane.server.realtime.turns import (
    CONTEXT_S,
    CUT_SEARCH_S,
    GAP_LOOKBACK_S,
    LOOKBACK_S,
    Piece,
    Turn,
    TurnState,
    completion_events,
    context_text,
)

S = SAMPLE_RATE


@dataclass(eq=False)
class FakeDecode:
    start: int
    end: int
    text: str | None = None
    """Set: the decode is done with this text."""
    cancelled: bool = False

    def done(self) -> bool:
        return self.text is not None or self.cancelled

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def result(self) -> str:
        assert self.text is not None
        return self.text


@dataclass
class FakeDecodes:
    finals: list[FakeDecode] = field(default_factory=list)
    pauses: list[FakeDecode] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)

    def start_final(self, start: int, end: int) -> FakeDecode:
        self.finals.append(FakeDecode(start, end))
        return self.finals[-1]

    def start_at_pause(self, turn: Turn[FakeDecode], start: int, end: int) -> FakeDecode:
        self.pauses.append(FakeDecode(start, end))
        return self.pauses[-1]

    def count_pause_decode(self, outcome: str) -> None:
        self.outcomes.append(outcome)


def state() -> tuple[TurnState[FakeDecode], FakeDecodes]:
    decodes = FakeDecodes()
    return TurnState(decodes), decodes


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * S), dtype=np.int16)


def types(events: list[dict[str, object]]) -> list[object]:
    return [e["type"] for e in events]


def test_a_manual_turn_commits_as_one_piece_and_the_next_turn_follows_it() -> None:
    turns, decodes = state()
    turns.take(silence(1.0), manual=True)
    first = turns.commit(now=5.0, shape="ga")
    assert first is not None
    assert types(first.events) == ["input_audio_buffer.committed", "conversation.item.added"]
    assert first.events[0]["previous_item_id"] is None
    assert [(d.start, d.end) for d in decodes.finals] == [(0, S)]
    assert first.turn.committed_at == 5.0 and turns.turn is None

    turns.take(silence(0.5), manual=True)
    second = turns.commit(now=6.0, shape="beta")
    assert second is not None
    assert types(second.events) == ["input_audio_buffer.committed", "conversation.item.created"]
    assert second.events[0]["previous_item_id"] == first.turn.item_id
    assert [(d.start, d.end) for d in decodes.finals] == [(0, S), (S, S + S // 2)]
    assert turns.commit(now=7.0, shape="ga") is None  # nothing open: nothing to commit


def test_speech_started_reads_back_to_the_previous_turn_and_partials_less_far() -> None:
    turns, _ = state()
    turns.take(silence(30.0), manual=False)
    event = turns.speech_started(25 * S, pad_ms=300)
    turn = turns.turn
    assert turn is not None
    assert event["type"] == "input_audio_buffer.speech_started" and event["item_id"] == turn.item_id
    assert event["audio_start_ms"] == 25_000
    assert turn.start == 25 * S - int(GAP_LOOKBACK_S * S)
    assert turn.partial_from == 25 * S - int(LOOKBACK_S * S)
    assert turn.speech_from == 25 * S + 300 * S // 1000


def test_a_stop_in_the_pause_s_silence_keeps_the_pause_decode_as_the_last_piece() -> None:
    turns, decodes = state()
    turns.take(silence(3.0), manual=False)
    turns.speech_started(0, pad_ms=0)
    turns.pause(2 * S, quiet_from=int(1.8 * S), behind=False)
    assert [(d.start, d.end) for d in decodes.pauses] == [(0, 2 * S)]

    stopped = turns.speech_stopped(int(2.5 * S))
    assert stopped is not None and stopped["audio_end_ms"] == 2500
    committed = turns.commit(now=1.0, shape="ga", end=int(2.5 * S), quiet_from=int(1.8 * S))
    assert committed is not None
    assert decodes.finals == []  # no second decode of the same audio
    assert decodes.outcomes == ["final"]
    assert [(p.start, p.end, p.text) for p in committed.turn.pieces] == [(0, int(2.5 * S), decodes.pauses[0])]


def test_a_stop_after_speech_resumed_decodes_the_turn_again() -> None:
    turns, decodes = state()
    turns.take(silence(4.0), manual=False)
    turns.speech_started(0, pad_ms=0)
    turns.pause(2 * S, quiet_from=int(1.8 * S), behind=False)
    turns.resume()
    assert decodes.pauses[0].cancelled and decodes.outcomes == ["speech_went_on"]
    turns.commit(now=1.0, shape="ga", end=int(3.5 * S), quiet_from=3 * S)
    assert [(d.start, d.end) for d in decodes.finals] == [(0, int(3.5 * S))]


def test_a_pause_starts_no_decode_while_the_previous_turn_is_behind_or_the_tail_is_too_short() -> None:
    turns, decodes = state()
    turns.take(silence(3.0), manual=False)
    turns.speech_started(0, pad_ms=0)
    turns.pause(2 * S, quiet_from=int(1.8 * S), behind=True)
    turns.pause(S // 20, quiet_from=0, behind=False)
    assert decodes.pauses == []


def test_partials_follow_the_clock_one_at_a_time_and_not_during_a_pause_decode() -> None:
    turns, decodes = state()
    turns.take(silence(0.4), manual=True)
    assert turns.partial_due(now=10.0, interval_s=1.0) is None  # under MIN_PARTIAL_S of speech
    turns.take(silence(0.4), manual=True)
    read = turns.partial_due(now=10.0, interval_s=1.0)
    assert read is not None and (read.start, read.end) == (0, int(0.8 * S))
    running = FakeDecode(0, 0)
    turns.partial = running
    turns.take(silence(0.4), manual=True)
    assert turns.partial_due(now=12.0, interval_s=1.0) is None  # one out already
    running.text = ""
    assert turns.partial_due(now=10.5, interval_s=1.0) is None  # not an interval since the last
    assert turns.partial_due(now=11.0, interval_s=1.0) is not None
    assert turns.partial_due(now=13.0, interval_s=1.0) is None  # no new audio
    turns.take(silence(0.4), manual=True)
    turns.pause(turns.received, quiet_from=0, behind=False)
    assert decodes.pauses and turns.partial_due(now=14.0, interval_s=1.0) is None


def test_a_partial_holds_back_its_last_word_and_is_dropped_once_the_turn_moved_on() -> None:
    turns, _ = state()
    turns.take(silence(1.0), manual=True)
    read = turns.partial_due(now=1.0, interval_s=1.0)
    assert read is not None
    assert turns.partial_words(read, "the quick brown") == ["the", "quick"]
    event = read.turn.delta(["the", "quick"], read.end)
    assert event["delta"] == "the quick" and event["audio_end_ms"] == 1000
    assert turns.partial_words(read, "the quick brown fox") == ["brown"]
    turns.commit(now=2.0, shape="ga")
    assert turns.partial_words(read, "the quick brown fox jumps") is None


def test_a_long_turn_is_cut_in_its_last_seconds_and_the_piece_decoded() -> None:
    turns, decodes = state()
    turns.take(silence(20.0), manual=True)
    assert turns.cut_region() is None
    turns.take(silence(9.0), manual=True)
    region = turns.cut_region()
    assert region is not None
    search_from, pcm = region
    assert search_from == 29 * S - int(CUT_SEARCH_S * S) and len(pcm) == int(CUT_SEARCH_S * S)
    partial = FakeDecode(0, 0)
    turns.partial = partial
    turns.cut(25 * S)
    assert partial.cancelled and turns.partial is None
    assert [(d.start, d.end) for d in decodes.finals] == [(0, 25 * S)]
    assert turns.turn is not None and turns.turn.tail == 25 * S


def test_audio_faster_than_the_speed_limit_is_refused_after_the_burst() -> None:
    turns, _ = state()
    turns.check_rate(10.0, now=100.0, max_speed=2.0)  # a clip sent whole
    turns.take(silence(10.0), manual=True)
    with pytest.raises(QueueFull):
        turns.check_rate(0.5, now=100.0, max_speed=2.0)
    turns.check_rate(0.5, now=100.5, max_speed=2.0)  # 1 s more allowed half a second later


def test_a_manual_buffer_is_refused_past_its_limit() -> None:
    turns, _ = state()
    turns.take(silence(5.0), manual=True)
    turns.check_room(1.0, max_buffer_s=6.0)
    with pytest.raises(InvalidRequest) as refused:
        turns.check_room(1.5, max_buffer_s=6.0)
    assert refused.value.code == "input_audio_buffer_full"


def test_clear_drops_the_turn_and_its_decodes() -> None:
    turns, decodes = state()
    turns.take(silence(30.0), manual=False)
    turns.speech_started(0, pad_ms=0)
    turns.cut(25 * S)
    turns.pause(29 * S, quiet_from=28 * S, behind=False)
    assert turns.clear(pad_ms=0)["type"] == "input_audio_buffer.cleared"
    assert turns.turn is None
    assert decodes.finals[0].cancelled and decodes.pauses[0].cancelled


def test_a_final_reads_the_pieces_before_it_back_to_context_s() -> None:
    turns, _ = state()
    for _ in range(4):  # four 8 s turns, back to back
        turns.take(silence(8.0), manual=True)
        turns.commit(now=0.0, shape="ga")
    context, first = turns.context(32 * S, 34 * S)
    assert [(p.start, p.end) for p in context] == [(16 * S, 24 * S), (24 * S, 32 * S)]
    assert first == 16 * S and 32 * S - first <= CONTEXT_S * S
    begin, prefix = context_text(context, [RuntimeError("failed"), " Hello there. "], 32 * S)
    assert (begin, prefix) == (24 * S, "Hello there.")


def test_the_context_is_as_long_as_the_setting_and_none_at_zero() -> None:
    for context_s, expected in ((10.0, [(24 * S, 32 * S)]), (0.0, [])):
        turns: TurnState[FakeDecode] = TurnState(FakeDecodes(), context_s=context_s)
        for _ in range(4):
            turns.take(silence(8.0), manual=True)
            turns.commit(now=0.0, shape="ga")
        context, first = turns.context(32 * S, 34 * S)
        assert [(p.start, p.end) for p in context] == expected
        assert first == (expected[0][0] if expected else 32 * S)


def test_a_completion_sends_the_unsent_words_then_the_whole_text() -> None:
    turn: Turn[FakeDecode] = Turn("item_1", S, "item_0")
    turn.pieces.append(Piece(S, 3 * S, FakeDecode(S, 3 * S)))
    turn.delta(["Hello"], 2 * S)
    events = completion_events(turn, [" Hello world. "], "ga", logprobs=False)
    assert types(events) == [
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.done",
    ]
    assert events[0]["delta"] == " world."
    done = events[1]
    assert done["transcript"] == "Hello world." and done["logprobs"] is None
    assert (done["audio_start_ms"], done["audio_end_ms"]) == (1000, 3000)
    assert done["usage"] == {"type": "duration", "seconds": 2.0}
    assert types(completion_events(turn, ["Hello world."], "beta", logprobs=False)) == [
        "conversation.item.input_audio_transcription.completed"
    ]


def test_audio_read_back_is_the_audio_sent_and_stays_so_as_chunks_come_and_old_audio_goes() -> None:
    turns, _ = state()
    ramp = (np.arange(200 * S) % 30011).astype(np.int16)  # every sample tells where it was sent
    taken: list[tuple[int, np.ndarray]] = []
    for at in range(0, len(ramp), 1600):  # 100 ms chunks, 200 s: the kept audio grows and is let go
        turns.take(ramp[at : at + 1600], manual=False)
        turns.let_go(pad_ms=300)
        if at % (7 * S) == 0 and turns.received - 3 * S >= turns.pcm_start:
            start = turns.received - 3 * S
            taken.append((start, turns.audio(start, turns.received)))
    assert turns.pcm_start > 100 * S  # old audio was let go
    assert np.array_equal(turns.audio(turns.pcm_start, turns.received), ramp[turns.pcm_start :])
    for start, pcm in taken:  # what a decode took is as it was sent, whatever came and went after
        assert np.array_equal(pcm, ramp[start : start + 3 * S])
