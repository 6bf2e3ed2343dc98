"""The engine's speech half in-process with a fake speech runner: order, abort, errors, no ASR interference."""

from __future__ import annotations

import threading
import time

import numpy as np

from voxlane.config import EngineConfig
from voxlane.engine.core import EngineCore
from voxlane.engine.tts import SpeechChunk
from voxlane.messages import SpeechUnit
from voxlane.runners.fake import FakeRunner


class FakeSpeech:
    """1 s of silence per unit at 1000 Hz, after ``delay_s``; units whose ids are [666] fail."""

    def __init__(self, delay_s: float = 0.01) -> None:
        self.delay_s = delay_s
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def synthesize(self, unit: SpeechUnit) -> tuple[np.ndarray, int]:
        with self.lock:
            self.calls.append((unit.request_id, unit.index))
        time.sleep(self.delay_s)
        if unit.phoneme_ids == [666]:
            raise ValueError("bad unit")
        return np.zeros(1000, dtype=np.int16), 1000


def unit(rid: str, index: int, last: bool, ids: list[int] | None = None) -> SpeechUnit:
    return SpeechUnit(rid, index, last, "m", "c", ids or [1, 2], 1.0, 0.667, 0.8)


def run_until(core: EngineCore, done: callable, timeout_s: float = 5.0) -> list[SpeechChunk]:
    out: list[SpeechChunk] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done(out):
        out.extend(r for r in core.step(time.monotonic()) if isinstance(r, SpeechChunk))
        time.sleep(0.002)
    return out


def make_core(order: str = "deadline", delay_s: float = 0.01) -> tuple[EngineCore, FakeSpeech]:
    speech = FakeSpeech(delay_s)
    config = EngineConfig(model_path="", tts_order=order)
    return EngineCore(FakeRunner(), config, tts_runners=[speech]), speech


def test_units_come_back_in_order_with_audio() -> None:
    core, _ = make_core()
    now = time.monotonic()
    for i in range(3):
        core.add_unit(unit("a", i, i == 2), now)
    out = run_until(core, lambda o: len(o) == 3)
    assert [c.msg.index for c in out] == [0, 1, 2]
    assert all(len(c.pcm) == 1000 and c.msg.sample_rate == 1000 for c in out)
    core.shutdown()


def test_abort_drops_units_and_is_idempotent() -> None:
    core, speech = make_core(delay_s=0.05)
    now = time.monotonic()
    for i in range(10):
        core.add_unit(unit("a", i, i == 9), now)
    core.step(now)  # unit 0 starts
    core.abort("a")
    core.abort("a")
    core.add_unit(unit("a", 10, True), now)  # a late unit of an aborted stream is dropped
    out = run_until(core, lambda o: False, timeout_s=0.3)
    assert out == []
    assert len(speech.calls) == 1
    core.shutdown()


def test_a_failing_unit_fails_its_stream_alone() -> None:
    core, _ = make_core()
    now = time.monotonic()
    core.add_unit(unit("bad", 0, True, ids=[666]), now)
    core.add_unit(unit("good", 0, True), now)
    out = run_until(core, lambda o: len(o) == 2)
    by_id = {c.msg.request_id: c.msg for c in out}
    assert by_id["bad"].error == "bad unit"
    assert by_id["good"].error is None
    core.shutdown()


def test_new_stream_is_served_before_a_buffered_one() -> None:
    core, speech = make_core("deadline")
    now = time.monotonic()
    for i in range(6):
        core.add_unit(unit("long", i, i == 5), now)
    run_until(core, lambda o: len(o) >= 2)  # 'long' has 2 s buffered
    core.add_unit(unit("new", 0, True), time.monotonic())
    run_until(core, lambda o: any(c.msg.request_id == "new" for c in o))
    first_new = speech.calls.index(("new", 0))
    assert first_new <= 3, speech.calls  # at most the unit already running went before it
    core.shutdown()
