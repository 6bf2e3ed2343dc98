"""EngineCore with live work (realtime sessions): a worker is kept free for it while sessions are active."""

from __future__ import annotations

import time

import numpy as np

from tests.engine.test_core import make_core, msg, run_until_idle, step_until
from voxlane.engine.core import LIVE_HOLD_S
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.fake import FakeRunner

FEATURES = np.zeros((80, 3000), dtype=np.float32)


def live(request_id: str) -> WindowRequest:
    return WindowRequest(request_id, 0, 1, 0.0, 5.0, 500, 80, TranscribeOptions(), deadline_s=0.1)


def test_a_live_final_starts_at_once_while_batch_work_fills_the_queue() -> None:
    runner = FakeRunner(delay_s=0.2)
    core = make_core(runner, engine_workers=2)
    core.add_window(live("partial"), FEATURES, time.monotonic())  # a session is active
    out = core.step(time.monotonic())
    out += step_until(core, lambda: not core.busy)  # the partial is done
    for i in range(12):
        core.add_window(msg("long", i, 12), FEATURES, time.monotonic())
    out += core.step(time.monotonic())
    out += step_until(core, lambda: len(runner.batches) >= 2)
    assert [b[0][0] for b in runner.batches] == ["partial", "long"]  # one worker stays free for live work
    core.add_window(live("final"), FEATURES, time.monotonic())
    out += core.step(time.monotonic())
    out += step_until(core, lambda: len(runner.batches) >= 3)
    assert runner.batches[2] == [("final", 0)]  # it started at once, not after a batch of the long file
    results = out + run_until_idle(core)
    assert sum(1 for r in results if r.request_id == "long") == 12  # batch work still finished


def test_without_live_work_batch_work_takes_every_worker() -> None:
    runner = FakeRunner(delay_s=0.1)
    core = make_core(runner, engine_workers=2)
    now = time.monotonic() + 10 * LIVE_HOLD_S
    for i in range(8):
        core.add_window(msg("long", i, 8), FEATURES, now)
    core.step(now)
    step_until(core, lambda: len(runner.batches) >= 2)  # both workers took a batch (each runs 0.1 s)
    assert len(runner.batches) == 2
    run_until_idle(core)
