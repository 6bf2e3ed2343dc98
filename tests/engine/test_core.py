"""EngineCore in-process with a fake runner: step = collect -> schedule -> execute."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import numpy as np
import pytest

from voxlane.config import EngineConfig
from voxlane.engine.core import EngineCore
from voxlane.messages import TranscribeOptions, WindowRequest, WindowResult
from voxlane.runners.fake import FakeRunner

FEATURES = np.zeros((80, 3000), dtype=np.float32)


def msg(request_id: str, index: int, count: int) -> WindowRequest:
    return WindowRequest(request_id, index, count, index * 30.0, 30.0, 3000, 80, TranscribeOptions())


def run_until_idle(core: EngineCore, timeout_s: float = 5.0) -> list[WindowResult]:
    out: list[WindowResult] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out += core.step(time.monotonic())
        if not core.busy:
            out += core.step(time.monotonic())
            return out
        time.sleep(0.002)
    raise AssertionError("engine did not go idle")


def step_until(core: EngineCore, done: Callable[[], bool], timeout_s: float = 5.0) -> list[WindowResult]:
    """Step the engine until ``done()`` (the workers run on threads of their own); the results on the way."""
    out: list[WindowResult] = []
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the engine never got there"
        out += core.step(time.monotonic())
        time.sleep(0.001)  # paces the polling
    return out


def make_core(runner: FakeRunner, **overrides: object) -> EngineCore:
    config = EngineConfig(model_path="whisper-default", max_batch_size=4, max_batch_wait_ms=0.0, **overrides)  # type: ignore[arg-type]
    return EngineCore(runner, config)


def test_every_window_gets_exactly_one_result() -> None:
    core = make_core(FakeRunner())
    for rid, count in (("a", 3), ("b", 1), ("c", 2)):
        for i in range(count):
            core.add_window(msg(rid, i, count), FEATURES, time.monotonic())
    results = run_until_idle(core)
    assert sorted((r.request_id, r.index) for r in results) == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("c", 0),
        ("c", 1),
    ]
    assert core.requests == {}  # finished requests leave no state behind


def test_abort_is_idempotent_and_drops_running_results() -> None:
    runner = FakeRunner(delay_s=0.05)
    core = make_core(runner)
    for i in range(6):
        core.add_window(msg("gone", i, 6), FEATURES, time.monotonic())
    core.add_window(msg("kept", 0, 1), FEATURES, time.monotonic())
    core.step(time.monotonic())  # a batch of 4 is now running
    core.abort("gone")
    core.abort("gone")
    core.abort("never-existed")
    results = run_until_idle(core)
    assert [(r.request_id, r.index) for r in results] == [("kept", 0)]
    # a late window of the aborted request is dropped too
    core.add_window(msg("gone", 5, 6), FEATURES, time.monotonic())
    assert run_until_idle(core) == []


def test_a_bad_window_fails_alone_not_its_batch() -> None:
    class Fragile(FakeRunner):
        def run(self, batch):  # type: ignore[no-untyped-def]
            if any(w.request_id == "poison" for w in batch):
                raise RuntimeError("model exploded")
            return super().run(batch)

    core = make_core(Fragile())
    core.add_window(msg("ok1", 0, 1), FEATURES, time.monotonic())
    core.add_window(msg("poison", 0, 1), FEATURES, time.monotonic())
    core.add_window(msg("ok2", 0, 1), FEATURES, time.monotonic())
    results = {r.request_id: r for r in run_until_idle(core)}
    assert results["ok1"].error is None and results["ok2"].error is None
    assert results["poison"].error is not None


def test_runner_returning_the_wrong_count_is_caught() -> None:
    class Short(FakeRunner):
        def run(self, batch):  # type: ignore[no-untyped-def]
            return super().run(batch)[:-1] if len(batch) > 1 else super().run(batch)

    core = make_core(Short())
    for i in range(3):
        core.add_window(msg("r", i, 3), FEATURES, time.monotonic())
    results = run_until_idle(core)
    assert sorted(r.index for r in results) == [0, 1, 2]  # retried one by one


@pytest.mark.parametrize("workers", [1, 2])
def test_parallel_workers_never_exceed_their_count(workers: int) -> None:
    runner = FakeRunner(delay_s=0.02)
    core = make_core(runner, engine_workers=workers)
    for i in range(16):
        core.add_window(msg(f"r{i}", 0, 1), FEATURES, time.monotonic())
    core.step(time.monotonic())
    assert len(core._running) == workers
    assert len(run_until_idle(core)) == 16


def test_a_window_that_stops_early_is_continued_and_its_text_lands_once_in_order() -> None:
    # Window 1 of "long" says end-of-text half way through, twice: the engine must decode the rest of it
    # as continuations (from where each pass stopped), while other requests' windows keep being served.
    runner = FakeRunner(stop_early={("long", 1): 2})
    core = make_core(runner)
    for i in range(3):
        core.add_window(msg("long", i, 3), FEATURES, time.monotonic())
    core.add_window(msg("short", 0, 1), FEATURES, time.monotonic())
    results = run_until_idle(core)

    assert sorted((r.request_id, r.index) for r in results) == [("long", 0), ("long", 1), ("long", 2), ("short", 0)]
    window = next(r for r in results if (r.request_id, r.index) == ("long", 1))
    assert [s.text for s in window.segments] == [" window 1", " window 1 part 1", " window 1 part 2"]
    # Each pass starts where the one before stopped (30 s window at 30 s: 45 s, then 52.5 s), and the
    # segments run forward without overlap.
    assert [(p[2], p[3]) for p in runner.passes if p[:2] == ("long", 1)] == [(0, 30.0), (1, 45.0), (2, 52.5)]
    ends = [(s.start, s.end) for s in window.segments]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ends))
    assert ends[-1][1] == 60.0
    assert core.continuations == 2 and window.passes == 3
    assert core.requests == {}


def test_a_continuation_of_an_aborted_request_is_dropped() -> None:
    runner = FakeRunner(delay_s=0.02, stop_early={("gone", 0): 3})
    core = make_core(runner)
    core.add_window(msg("gone", 0, 1), FEATURES, time.monotonic())
    core.step(time.monotonic())  # the first pass is running
    step_until(core, lambda: core.continuations == 1)  # it stopped early: its continuation is queued
    core.abort("gone")
    assert run_until_idle(core) == []
    assert len(core.scheduler) == 0
