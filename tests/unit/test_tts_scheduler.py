"""The speech deadline scheduler on a fake clock."""

from __future__ import annotations

from voxlane.engine.scheduler_tts import TtsScheduler, UnitWork
from voxlane.messages import SpeechUnit


def unit(request_id: str, index: int, last: bool = False) -> UnitWork:
    return UnitWork(SpeechUnit(request_id, index, last, "m.onnx", "m.onnx.json", [1, 2, 3], 1.0, 0.667, 0.8))


def run_one(s: TtsScheduler, now: float, audio_s: float) -> UnitWork:
    work = s.next_unit(now)
    assert work is not None
    s.done(work.request_id, audio_s, now, last=work.msg.last)
    return work


def test_new_stream_first_unit_beats_a_buffered_stream() -> None:
    s = TtsScheduler("deadline")
    for i in range(5):
        s.add(unit("long", i, last=i == 4), now=0.0)
    run_one(s, 0.0, audio_s=10.0)  # 'long' now has 10 s buffered: next due at 10.0
    s.add(unit("new", 0, last=True), now=1.0)
    assert s.next_unit(1.0).request_id == "new"


def test_fifo_serves_streams_in_arrival_order() -> None:
    s = TtsScheduler("fifo")
    for i in range(3):
        s.add(unit("a", i, last=i == 2), now=0.0)
    s.add(unit("b", 0, last=True), now=0.5)
    order = [run_one(s, 1.0, 3.0).request_id for _ in range(4)]
    assert order == ["a", "a", "a", "b"]


def test_earliest_deadline_runs_first() -> None:
    s = TtsScheduler("deadline")
    for rid in ("x", "y"):
        s.add(unit(rid, 0), now=0.0)
        s.add(unit(rid, 1, last=True), now=0.0)
    assert run_one(s, 0.0, audio_s=5.0).request_id == "x"  # x plays from 0.0, due again at 5.0
    assert run_one(s, 0.1, audio_s=1.0).request_id == "y"  # y plays from 0.1, due again at 1.1
    assert s.next_unit(0.2).request_id == "y"


def test_only_one_unit_per_stream_runs_at_a_time() -> None:
    s = TtsScheduler("deadline")
    s.add(unit("a", 0), now=0.0)
    s.add(unit("a", 1, last=True), now=0.0)
    assert s.next_unit(0.0).msg.index == 0
    assert s.next_unit(0.0) is None  # unit 1 waits for unit 0
    s.done("a", 1.0, 0.1)
    assert s.next_unit(0.1).msg.index == 1


def test_abort_is_idempotent_and_drops_queued_units() -> None:
    s = TtsScheduler("deadline")
    for i in range(3):
        s.add(unit("a", i, last=i == 2), now=0.0)
    work = s.next_unit(0.0)
    assert s.abort("a") == 2
    assert s.abort("a") == 0
    assert len(s) == 0
    s.done(work.request_id, 1.0, 0.1)  # the running unit finishing after the abort is harmless
    assert s.next_unit(0.2) is None and s.stream_count == 0


def test_last_unit_forgets_the_stream() -> None:
    s = TtsScheduler("deadline")
    s.add(unit("a", 0, last=True), now=0.0)
    run_one(s, 0.0, 1.0)
    assert s.stream_count == 0
