"""Live work (realtime sessions) in the ASR scheduler: ordered by its deadline, never starving batch work."""

from __future__ import annotations

import numpy as np
import pytest

from voxlane.engine.request import WindowWork
from voxlane.engine.scheduler import AsrScheduler
from voxlane.messages import TranscribeOptions, WindowRequest

FULL = np.zeros((80, 3000), dtype=np.float32)
SHORT = np.zeros((80, 400), dtype=np.float32)


def batch_window(request_id: str, index: int, arrival_s: float) -> WindowWork:
    msg = WindowRequest(request_id, index, 240, index * 30.0, 30.0, 3000, 80, TranscribeOptions())
    return WindowWork(msg, FULL, arrival_s=arrival_s, enqueued_s=arrival_s)


def live_window(request_id: str, now: float, deadline_s: float = 0.3, partial: bool = False) -> WindowWork:
    msg = WindowRequest(
        request_id, 0, 1, 0.0, 4.0, 400, 80, TranscribeOptions(), deadline_s=deadline_s, partial=partial
    )
    return WindowWork(msg, SHORT if partial else FULL, arrival_s=now, enqueued_s=now)


def ids(batch: list[WindowWork] | None) -> list[str]:
    return [f"{w.request_id}{w.msg.index}" for w in batch or []]


def test_a_live_final_goes_ahead_of_a_long_files_later_windows() -> None:
    s = AsrScheduler(max_batch_size=2, max_batch_wait_s=0.0, window_cost_s=0.5)
    for i in range(240):
        s.add(batch_window("long", i, arrival_s=0.0), now=0.0)
    assert ids(s.next_batch(now=0.0)) == ["long0", "long1"]
    s.add(live_window("live", now=1.0), now=1.0)  # due at 1.3: long2 (1.0) is due before it, long3 (1.5) after
    assert ids(s.next_batch(now=1.0)) == ["long2"]  # live work shares no batch with batch windows
    assert ids(s.next_batch(now=1.0)) == ["live0"]
    assert ids(s.next_batch(now=1.0)) == ["long3", "long4"]


def test_live_work_arriving_all_the_time_does_not_starve_batch_work() -> None:
    s = AsrScheduler(max_batch_size=1, max_batch_wait_s=0.0, window_cost_s=0.5)
    s.add(batch_window("clip", 0, arrival_s=0.0), now=0.0)
    served = []
    for tick in range(6):  # a live window arrives before every batch, each due 0.3 s after it arrives
        now = 0.1 * tick
        s.add(live_window(f"live{tick}-", now=now), now=now)
        served += ids(s.next_batch(now))
    assert "clip0" in served[:1]  # its fair start (0.0) came before any live deadline


def test_a_later_batch_window_waits_behind_live_work_due_earlier() -> None:
    s = AsrScheduler(max_batch_size=1, max_batch_wait_s=0.0, window_cost_s=0.5)
    for i in range(10):
        s.add(batch_window("long", i, arrival_s=0.0), now=0.0)
    now = 2.0  # long0..long4 are due by now; live work due at 2.3 goes before long5 (2.5)
    s.add(live_window("live", now=now), now=now)
    order = [ids(s.next_batch(now))[0] for _ in range(7)]
    assert order == ["long0", "long1", "long2", "long3", "long4", "live0", "long5"]


def test_live_decodes_run_one_to_a_batch_finals_first() -> None:
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0)
    for name in ("a", "b", "c"):
        s.add(live_window(name, now=0.0, deadline_s=0.1), now=0.0)
    for name in ("p", "q"):
        s.add(live_window(name, now=0.0, deadline_s=0.5, partial=True), now=0.0)
    batches = [ids(s.next_batch(now=0.0)) for _ in range(5)]
    assert batches == [["a0"], ["b0"], ["c0"], ["p0"], ["q0"]]
    assert s.next_batch(now=0.0) is None


def test_aborting_a_live_request_drops_it() -> None:
    s = AsrScheduler(max_batch_size=4, max_batch_wait_s=0.0)
    s.add(live_window("p", now=0.0, partial=True), now=0.0)
    assert s.abort("p") == 1 and s.abort("p") == 0
    assert s.next_batch(now=1.0) is None


def test_a_live_final_does_not_share_its_batch_with_batch_windows() -> None:
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0, window_cost_s=0.5)
    for i in range(8):
        s.add(batch_window("long", i, arrival_s=0.0), now=0.0)
    s.add(live_window("live", now=0.0, deadline_s=0.1), now=0.0)  # due after long0 (0.0), before long1 (0.5)
    assert ids(s.next_batch(now=0.0)) == ["long0"]  # long1..7 do not jump ahead of it into this batch
    assert ids(s.next_batch(now=0.0)) == ["live0"]  # nor wait in its batch
    assert ids(s.next_batch(now=0.0)) == [f"long{i}" for i in range(1, 8)]


def test_a_final_logs_how_many_other_finals_wait(caplog: pytest.LogCaptureFixture) -> None:
    """The debug line docs/asr-engine.md counts finals due together with: other finals only, not partials
    and not the final that starts."""
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0, window_cost_s=0.5)
    s.add(live_window("a", now=0.0, deadline_s=0.1), now=0.0)
    s.add(live_window("b", now=0.0, deadline_s=0.2), now=0.0)
    s.add(live_window("c", now=0.0, deadline_s=0.3, partial=True), now=0.0)
    with caplog.at_level("DEBUG", logger="voxlane.engine.scheduler"):
        assert ids(s.next_batch(now=0.0)) == ["a0"]
        assert ids(s.next_batch(now=0.0)) == ["b0"]
        assert ids(s.next_batch(now=0.0)) == ["c0"]
    assert [r.getMessage() for r in caplog.records] == [
        "a live final starts with 1 more live finals queued",
        "a live final starts with 0 more live finals queued",
    ]


def test_live_decodes_queued_together_share_a_batch_up_to_live_batch_size() -> None:
    """--live-batch-size (16 on a GPU): the finals of different sessions that are queued together share a batch,
    and so do the partials, never the two kinds together, never more than the setting."""
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0, live_batch_size=2)
    for name in ("a", "b", "c"):
        s.add(live_window(name, now=0.0, deadline_s=0.1), now=0.0)
    for name in ("p", "q"):
        s.add(live_window(name, now=0.0, deadline_s=0.5, partial=True), now=0.0)
    batches = [ids(s.next_batch(now=0.0)) for _ in range(3)]
    assert batches == [["a0", "b0"], ["c0"], ["p0", "q0"]]
    assert s.next_batch(now=0.0) is None


def test_a_live_batch_takes_only_live_work_and_never_waits_for_it() -> None:
    """Batch windows due between two finals stay where they are; a final alone starts alone at once."""
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0, window_cost_s=0.5, live_batch_size=16)
    for i in range(8):
        s.add(batch_window("long", i, arrival_s=0.0), now=0.0)
    s.add(live_window("a", now=0.0, deadline_s=0.1), now=0.0)
    s.add(live_window("b", now=0.6, deadline_s=0.1), now=0.6)  # due at 0.7, after long1 (0.5)
    assert ids(s.next_batch(now=0.6)) == ["long0"]
    assert ids(s.next_batch(now=0.6)) == ["a0", "b0"]
    assert ids(s.next_batch(now=0.6)) == [f"long{i}" for i in range(1, 8)]
    s.add(live_window("c", now=1.0, deadline_s=0.1), now=1.0)
    assert ids(s.next_batch(now=1.0)) == ["c0"]


def test_live_work_is_split_evenly_over_the_free_workers() -> None:
    """Five finals queued with two workers free: batches of three and two, not one of five beside an idle
    worker."""
    s = AsrScheduler(max_batch_size=16, max_batch_wait_s=0.0, live_batch_size=16)
    for name in "abcde":
        s.add(live_window(name, now=0.0, deadline_s=0.1), now=0.0)
    assert ids(s.next_batch(now=0.0, free_workers=2)) == ["a0", "b0", "c0"]
    assert ids(s.next_batch(now=0.0, free_workers=1)) == ["d0", "e0"]
