"""The speech deadline scheduler on a fake clock."""

from __future__ import annotations

import statistics
from typing import Any

from voxlane.bench.tts_sim import simulate as simulate_paragraphs
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


def ids_unit(request_id: str, index: int, ids: int, last: bool = False) -> UnitWork:
    return UnitWork(SpeechUnit(request_id, index, last, "m.onnx", "m.onnx.json", [1] * ids, 1.0, 0.667, 0.8))


def test_new_stream_does_not_delay_an_at_risk_started_stream() -> None:
    s = TtsScheduler("deadline")
    s.add(ids_unit("playing", 0, 30), now=0.0)
    s.add(ids_unit("playing", 1, 100, last=True), now=0.0)
    first = s.next_unit(0.0)
    s.done(first.request_id, 1.0, now=0.1)  # 1 s of audio delivered at 0.1: the player runs dry at 1.1
    s.add(ids_unit("new", 0, 30, last=True), now=0.7)
    # At 0.7 'playing' has 0.4 s left, its next unit takes ~0.3 s: a new first unit before it would stall it.
    assert s.next_unit(0.7).request_id == "playing"


def test_under_light_load_a_new_streams_first_unit_goes_first() -> None:
    s = TtsScheduler("deadline")
    s.add(ids_unit("playing", 0, 30), now=0.0)
    s.add(ids_unit("playing", 1, 100, last=True), now=0.0)
    first = s.next_unit(0.0)
    s.done(first.request_id, 1.0, now=0.1)
    s.add(ids_unit("new", 0, 30, last=True), now=0.15)
    # 'playing' has 0.95 s left and needs ~0.3 s: there is time for the new stream's first sound first.
    assert s.next_unit(0.15).request_id == "new"


def test_new_streams_start_in_arrival_order() -> None:
    s = TtsScheduler("deadline")
    for rid in ("a", "b", "c"):
        s.add(ids_unit(rid, 0, 30, last=True), now=0.0)
    assert [run_one(s, 0.0, 1.0).request_id for _ in range(3)] == ["a", "b", "c"]


def simulate(order: str, streams: int, units: int, rtf: float) -> dict[str, tuple[float, int, float]]:
    """All streams arrive at 0; every unit is 2 s of audio (the first 1 s) and takes ``rtf`` x its audio
    to synthesise on the one speech thread. Returns per stream: (time to first audio, stalls, stall s)
    of a player that starts at the first unit and plays in real time."""
    s = TtsScheduler(order)
    for n in range(streams):
        for i in range(units):
            s.add(ids_unit(f"s{n}", i, 20 if i == 0 else 40, last=i == units - 1), now=0.0)
    now = 0.0
    arrivals: dict[str, list[tuple[float, float]]] = {}
    while (work := s.next_unit(now)) is not None:
        audio = 1.0 if work.msg.index == 0 else 2.0
        now += audio * rtf
        s.done(work.request_id, audio, now, last=work.msg.last)
        got = arrivals.setdefault(work.request_id, [])
        got.append((now, (got[-1][1] if got else 0.0) + audio))
    out = {}
    for rid, got in arrivals.items():
        start, buffered = got[0]
        stalled, count = 0.0, 0
        for t, cumulative in got[1:]:
            if t - start - stalled > buffered + 1e-9:
                count += 1
                stalled += t - start - stalled - buffered
            buffered = cumulative
        out[rid] = (start, count, stalled)
    return out


def test_under_capacity_no_stream_stalls_and_all_start_at_once() -> None:
    result = simulate("deadline", streams=4, units=8, rtf=0.1)  # demand 0.4 of the thread
    assert all(stalls == 0 for _, stalls, _ in result.values())
    starts = sorted(start for start, _, _ in result.values())
    assert starts[1] <= 0.2 and starts[-1] < 1.0  # first sounds come at once, the 4th after a second unit


def test_past_capacity_started_streams_keep_playing_while_new_ones_wait() -> None:
    # 12 streams at RTF 0.25: the thread can keep about 4 playing. Admission keeps the started ones whole
    # and makes the later ones wait for their first sound instead.
    result = simulate("deadline", streams=12, units=8, rtf=0.25)
    assert sum(stalls for _, stalls, _ in result.values()) == 0
    starts = sorted(start for start, _, _ in result.values())
    assert starts[1] < 2.0  # the first streams start at once
    assert starts[-1] > 20.0  # the last ones wait for streams to finish


def test_a_stream_that_would_stall_even_alone_is_not_held_back_for_it() -> None:
    s = TtsScheduler("deadline")
    s.add(ids_unit("playing", 0, 30), now=0.0)
    s.add(ids_unit("playing", 1, 100, last=True), now=0.0)
    first = s.next_unit(0.0)
    s.done(first.request_id, 10.0, now=0.1)  # 'playing' has 10 s to play: time for anything below
    s.add(ids_unit("odd", 0, 10), now=0.1)  # ~0.3 s of audio, then a unit that takes ~1 s to synthesise
    s.add(ids_unit("odd", 1, 330, last=True), now=0.1)
    assert s.next_unit(0.1).request_id == "odd"  # it will stutter once whatever the order; start it now


def _tight_started_stream(slots: int) -> TtsScheduler:
    """Stream 'a' plays from 0.0 with 0.8 s delivered and more to come; each unit costs 0.3 s of
    synthesis (0.375 s with the headroom) and gives 0.6 s of audio."""
    s = TtsScheduler("deadline")
    s.slots = slots
    s.s_per_id, s.audio_per_id_s = 0.1, 0.2
    for i in range(4):
        s.add(unit("a", i, last=i == 3), now=0.0)
    first = s.next_unit(0.0)
    assert first is not None
    s.done("a", 0.8, 0.0)
    s.add(unit("b", 0), now=0.0)
    s.add(unit("b", 1, last=True), now=0.0)
    return s


def test_admission_counts_parallel_slots() -> None:
    # One slot: b's first unit (0.375 s) then a's next would end at 0.75 s, past a's 0.8 s minus the margin.
    one = _tight_started_stream(slots=1)
    assert one.next_unit(0.0).request_id == "a"
    # Two slots: a's next unit runs beside b's first, so b starts at once.
    two = _tight_started_stream(slots=2)
    assert two.next_unit(0.0).request_id == "b"
    assert two.next_unit(0.0).request_id == "a"
    assert two.next_unit(0.0) is None  # one unit per stream at a time


def test_running_units_hold_their_slots_in_the_admission_check() -> None:
    s = _tight_started_stream(slots=2)
    s.add(unit("c", 0), now=0.0)
    s.add(unit("c", 1, last=True), now=0.0)
    assert s.next_unit(0.0).request_id == "b"  # b's first unit takes one slot ...
    # ... so c's first unit would make a's next unit wait behind it: a runs first, c waits.
    assert s.next_unit(0.0).request_id == "a"


def test_a_unit_on_the_solo_session_does_not_teach_the_cost_of_parallel_work() -> None:
    s = TtsScheduler("deadline")
    s.add(unit("a", 0), now=0.0)
    s.add(unit("a", 1, last=True), now=0.0)
    before = s.s_per_id
    s.next_unit(0.0)
    s.done("a", 1.0, 0.001, learn_cost=False)  # ran on all cores: far faster than a slot
    assert s.s_per_id == before
    s.next_unit(0.001)
    s.done("a", 1.0, 0.5, last=True)
    assert s.s_per_id > before


def _simulate(streams: int, slots: int, **kwargs: Any) -> tuple[list[float], int]:
    return simulate_paragraphs(streams, slots, **kwargs)


def test_on_a_quiet_machine_two_slots_start_8_streams_within_the_targets_and_none_runs_dry() -> None:
    """The policy on a fake clock, not the machine: the speech targets at 8 streams (TTFP p50 <= 0.4 s,
    p99 <= 1 s, no stall) are met on two slots and missed on one; at 16 streams (70% of two slots'
    capacity here) the median still starts within 1 s and started streams never run dry, while the last
    streams wait for the first ones to build a buffer."""
    ttfp, dry = _simulate(8, slots=2)
    assert dry == 0 and statistics.median(ttfp) <= 0.4 and max(ttfp) <= 1.0, sorted(ttfp)
    ttfp_one, _ = _simulate(8, slots=1)
    assert max(ttfp_one) > 1.0
    ttfp16, dry16 = _simulate(16, slots=2)
    assert dry16 == 0 and statistics.median(ttfp16) <= 1.0, sorted(ttfp16)


def test_clause_sized_units_start_the_16th_stream_sooner() -> None:
    """A slot runs a unit to its end: with whole sentences (up to 300 characters) the last of 16 streams
    waited 4.6 s here, behind long units of streams that were safe anyway; with units cut at clauses to 60
    characters it starts after 3.0 s (2.1 s at the machine's speed when quiet), and no stream runs dry."""
    whole, dry_whole = _simulate(16, slots=2, clause_chars=300)
    capped, dry_capped = _simulate(16, slots=2)
    assert dry_whole == 0 and dry_capped == 0
    assert max(capped) < 0.7 * max(whole), (max(capped), max(whole))
    fast, dry_fast = _simulate(16, slots=2, s_per_id=0.0021)
    assert dry_fast == 0 and max(fast) < 2.5, sorted(fast)


def test_no_stream_runs_dry_when_unit_costs_vary() -> None:
    """The estimates are smoothed averages, and a unit can take longer than its estimate (other work on
    the core, a hard text): with costs off by a lognormal factor of sigma 0.3 (a unit 1.35x its estimate
    about one time in six), the default headroom keeps every started stream playing, in 10 runs of 16
    streams at two machine speeds. (The machine is harsher: under mixed load a headroom of 1.15, which
    passes here, let one stream of 16 stall; docs/tts.md.)"""
    for seed in range(10):
        for s_per_id in (0.0024, 0.0021):
            _, dry = _simulate(16, slots=2, s_per_id=s_per_id, noise=0.3, seed=seed)
            assert dry == 0, (seed, s_per_id)


def test_cost_headroom_decides_how_close_a_new_stream_may_cut_it() -> None:
    # 'a' plays from 0.0 with 1.0 s delivered; its next unit costs 0.3 s. On one slot, b's one-unit stream
    # first and then a's next unit end at 0.6 s x headroom, which must be before 1.0 - 0.3 s.
    for headroom, first in ((1.15, "b"), (1.25, "a")):
        s = TtsScheduler("deadline", cost_headroom=headroom)
        for i in range(4):
            s.add(unit("a", i, last=i == 3), now=0.0)
        s.next_unit(0.0)
        s.done("a", 1.0, 0.0)
        s.s_per_id, s.audio_per_id_s = 0.1, 0.2  # 0.3 s and 0.6 s per unit of 3 ids
        s.add(unit("b", 0, last=True), now=0.0)
        assert s.next_unit(0.0).request_id == first, headroom
