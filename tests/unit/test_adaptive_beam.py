"""Load-adaptive decoding, on a fake clock: each batch of batch work leaves the scheduler with the beam its
windows are decoded at, the wide one while the queue behind it is short, greedy while it is long."""

from __future__ import annotations

from tests.unit.test_scheduler import FEATURES
from tests.unit.test_scheduler import window as timestamped_window
from voxlane.engine.request import WindowWork
from voxlane.engine.scheduler import AsrScheduler
from voxlane.messages import TranscribeOptions, WindowRequest


def window(request_id: str, index: int, count: int, arrival_s: float) -> WindowWork:
    """A window of a request whose response shows no times (json, text): decoded without timestamp tokens
    when it is the request's only one."""
    msg = WindowRequest(request_id, index, count, index * 30.0, 30.0, 3000, 80, TranscribeOptions(timestamps=False))
    return WindowWork(msg, FEATURES, arrival_s=arrival_s, enqueued_s=arrival_s)


def scheduler(queue_s: float = 2.0, beam: int = 5) -> AsrScheduler:
    # 0.25 s of engine time a window: 8 windows queued are 2 s of work.
    return AsrScheduler(max_batch_size=2, max_batch_wait_s=0.0, window_cost_s=0.25, beam_size=beam,
                        adaptive_queue_s=queue_s)  # fmt: skip


def test_a_lone_request_gets_the_wide_beam() -> None:
    s = scheduler()
    s.add(window("clip", 0, 1, 0.0), now=0.0)
    (work,) = s.next_batch(now=0.0) or []
    assert work.beam_size == 5


def test_windows_decoded_with_timestamp_tokens_get_no_beam() -> None:
    """A long file's windows (timestamps decoded to seek) and a clip whose response shows times: greedy, with
    the doubt beam, even alone; beside them a clip read without the tokens still gets the beam."""
    s = scheduler()
    for i in range(40):  # 20 minutes of audio: 40 windows, one request
        s.add(window("long", i, 40, 0.0), now=0.0)
    beams = set()
    while len(s):
        beams |= {w.beam_size for w in s.next_batch(now=0.0) or []}
    assert beams == {1}
    s.add(timestamped_window("verbose", 0, 1, 0.0), now=0.0)
    s.add(window("json", 0, 1, 0.0), now=0.0)
    first, second = s.next_batch(now=0.0) or [], s.next_batch(now=0.0) or []
    assert len(first) == len(second) == 1  # the two never share a batch
    assert {(w.request_id, w.beam_size) for w in first + second} == {("verbose", 1), ("json", 5)}


def test_a_long_file_in_the_queue_counts_once() -> None:
    """Requests are counted, not windows: 40 windows of one file queued ahead leave a clip its beam."""
    s = scheduler()
    for i in range(40):
        s.add(window("long", i, 40, 0.0), now=0.0)
    s.add(window("clip", 0, 1, 0.0), now=0.0)
    beams = {}
    while len(s):
        beams |= {w.request_id: w.beam_size for w in s.next_batch(now=0.0) or []}
    assert beams == {"long": 1, "clip": 5}


def test_a_fixed_beam_decodes_every_window_at_it() -> None:
    s = scheduler(queue_s=0.0)
    for i in range(4):
        s.add(window("long", i, 4, 0.0), now=0.0)
    s.add(timestamped_window("verbose", 0, 1, 0.0), now=0.0)
    beams = set()
    while len(s):
        beams |= {w.beam_size for w in s.next_batch(now=0.0) or []}
    assert beams == {5}


def test_a_long_queue_decodes_greedily_and_the_beam_comes_back_as_it_drains() -> None:
    s = scheduler()
    for i in range(16):
        s.add(window(f"r{i}", 0, 1, 0.0), now=0.0)
    beams = []
    now = 0.0
    while len(s):
        batch = s.next_batch(now) or []
        assert len({w.beam_size for w in batch}) == 1  # one beam for the whole batch
        beams.append((len(s), batch[0].beam_size))
        now += 0.5
    # 14 requests left behind the first batch: 3.5 s of work, over 2 s; 8 left (2 s) is within it.
    assert beams == [(14, 1), (12, 1), (10, 1), (8, 5), (6, 5), (4, 5), (2, 5), (0, 5)]


def test_requests_in_running_batches_count_too() -> None:
    """16 clients' windows may all be in the engine's batches at once, leaving the queue nearly empty."""
    s = scheduler()
    s.add(window("last", 0, 1, 0.0), now=0.0)
    (work,) = s.next_batch(now=0.0, active_requests=16) or []  # 15 others in the engine: 3.75 s of work
    assert work.beam_size == 1
    s.add(window("alone", 0, 1, 0.0), now=0.0)
    (work,) = s.next_batch(now=0.0, active_requests=1) or []
    assert work.beam_size == 5


def test_the_queue_is_measured_at_the_engine_s_pace() -> None:
    s = scheduler()
    for i in range(6):
        s.add(window(f"r{i}", 0, 1, 0.0), now=0.0)
    s.window_cost_s = 1.0  # the engine slowed down: 4 requests behind are 4 s of work
    assert {w.beam_size for w in s.next_batch(now=0.0) or []} == {1}
    s.window_cost_s = 0.25
    assert {w.beam_size for w in s.next_batch(now=0.0) or []} == {5}


def test_zero_keeps_the_wide_beam_under_any_queue_and_beam_one_is_always_greedy() -> None:
    for queue_s, beam, want in ((0.0, 5, 5), (2.0, 1, 1)):
        s = scheduler(queue_s, beam)
        for i in range(40):
            s.add(window(f"r{i}", 0, 1, 0.0), now=0.0)
        assert {w.beam_size for w in s.next_batch(now=0.0) or []} == {want}


def test_live_work_keeps_the_beam_its_session_asked_for() -> None:
    s = scheduler()
    for i in range(16):
        s.add(window(f"r{i}", 0, 1, 1.0), now=0.0)  # batch work whose fair turn comes after the final's deadline
    options = TranscribeOptions(beam_size=3)
    msg = WindowRequest("live", 0, 1, 0.0, 5.0, 500, 80, options, deadline_s=0.2)
    s.add(WindowWork(msg, FEATURES, arrival_s=0.0, enqueued_s=0.0), now=0.0)
    (final,) = s.next_batch(now=0.0) or []
    assert final.request_id == "live" and final.beam_size is None  # the runner reads options.beam_size
