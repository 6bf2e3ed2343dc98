"""The ASR batching policy, on a fake clock."""

from __future__ import annotations

import numpy as np

from voxlane.engine.request import WindowWork
from voxlane.engine.scheduler import AsrScheduler
from voxlane.messages import TranscribeOptions, WindowRequest

FEATURES = np.zeros((80, 3000), dtype=np.float32)


def window(request_id: str, index: int, count: int, arrival_s: float, temperature: float = 0.0) -> WindowWork:
    msg = WindowRequest(
        request_id, index, count, index * 30.0, 30.0, 3000, 80, TranscribeOptions(temperature=temperature)
    )
    return WindowWork(msg, FEATURES, arrival_s=arrival_s, enqueued_s=arrival_s)


def ids(batch: list[WindowWork] | None) -> list[tuple[str, int]]:
    return [(w.request_id, w.msg.index) for w in batch or []]


def test_a_batch_waits_for_max_wait_then_goes_partial() -> None:
    s = AsrScheduler(max_batch_size=4, max_batch_wait_s=0.010)
    s.add(window("a", 0, 1, 0.0), now=0.0)
    assert s.next_batch(now=0.005) is None
    assert s.next_deadline() == 0.010
    assert ids(s.next_batch(now=0.010)) == [("a", 0)]
    assert len(s) == 0 and s.next_deadline() is None


def test_a_full_batch_goes_at_once() -> None:
    s = AsrScheduler(max_batch_size=3, max_batch_wait_s=10.0)
    for i in range(4):
        s.add(window(f"r{i}", 0, 1, 0.0), now=0.0)
    assert len(s.next_batch(now=0.0) or []) == 3
    assert s.next_batch(now=0.0) is None  # one left, under max_wait
    assert ids(s.next_batch(now=10.0)) == [("r3", 0)]


def test_a_short_clip_is_not_starved_by_a_long_file() -> None:
    s = AsrScheduler(max_batch_size=2, max_batch_wait_s=0.0, window_cost_s=0.5)
    for i in range(240):  # a 2-hour file
        s.add(window("long", i, 240, arrival_s=0.0), now=0.0)
    served = []
    now = 0.0
    for _ in range(5):  # the engine works through 10 windows of the long file...
        served += ids(s.next_batch(now))
        now += 1.0
    s.add(window("clip", 0, 1, arrival_s=now), now=now)  # ...then a 3-second clip arrives
    batch = ids(s.next_batch(now))
    assert ("clip", 0) in batch  # served in the very next batch
    assert served[:10] == [("long", i) for i in range(10)]


def test_two_long_files_share_the_engine_evenly() -> None:
    s = AsrScheduler(max_batch_size=2, max_batch_wait_s=0.0, window_cost_s=0.5)
    for i in range(20):
        s.add(window("a", i, 20, arrival_s=0.0), now=0.0)
    for i in range(20):
        s.add(window("b", i, 20, arrival_s=1.0), now=1.0)
    served = [rid for _ in range(10) for rid, _ in ids(s.next_batch(now=1.0))]
    # b arrived 1 s (two window costs) later: after a's first two windows, they alternate.
    assert served[:2] == ["a", "a"]
    assert abs(served.count("a") - served.count("b")) <= 2


def test_abort_drops_queued_windows_and_is_idempotent() -> None:
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0)
    for i in range(3):
        s.add(window("gone", i, 3, 0.0), now=0.0)
    s.add(window("kept", 0, 1, 0.0), now=0.0)
    assert s.abort("gone") == 3
    assert s.abort("gone") == 0
    assert s.abort("never-seen") == 0
    assert len(s) == 1
    assert ids(s.next_batch(now=0.0)) == [("kept", 0)]


def test_windows_of_different_temperatures_are_not_mixed() -> None:
    s = AsrScheduler(max_batch_size=8, max_batch_wait_s=0.0)
    s.add(window("greedy", 0, 1, 0.0), now=0.0)
    s.add(window("warm", 0, 1, 0.1, temperature=0.5), now=0.1)
    s.add(window("greedy2", 0, 1, 0.2), now=0.2)
    assert ids(s.next_batch(now=1.0)) == [("greedy", 0), ("greedy2", 0)]
    assert ids(s.next_batch(now=1.0)) == [("warm", 0)]


def short_window(request_id: str, arrival_s: float, n_frames: int) -> WindowWork:
    msg = WindowRequest(request_id, 0, 1, 0.0, n_frames / 100, n_frames, 80, TranscribeOptions())
    return WindowWork(msg, FEATURES, arrival_s=arrival_s, enqueued_s=arrival_s)


def test_short_windows_batch_apart_from_30_s_windows() -> None:
    """With --short-window-pad-s, a window with at most 8 s of audio is encoded on 8 s and the pad; beside a
    30 s window it would be padded to 30 s again, so it waits for its own batch."""
    s = AsrScheduler(max_batch_size=4, max_batch_wait_s=0.0, short_pad_frames=500)
    s.add(short_window("short-a", 0.0, 300), now=0.0)
    s.add(window("long", 0, 1, 0.1), now=0.1)
    s.add(short_window("short-b", 0.2, 800), now=0.2)
    s.add(short_window("9s", 0.3, 900), now=0.3)  # more than 8 s of audio: a 30 s window
    assert ids(s.next_batch(now=1.0)) == [("short-a", 0), ("short-b", 0)]
    assert ids(s.next_batch(now=1.0)) == [("long", 0), ("9s", 0)]
    plain = AsrScheduler(max_batch_size=4, max_batch_wait_s=0.0)  # the setting off: one batch
    for w in (short_window("short-a", 0.0, 300), window("long", 0, 1, 0.1)):
        plain.add(w, now=w.arrival_s)
    assert ids(plain.next_batch(now=1.0)) == [("short-a", 0), ("long", 0)]
