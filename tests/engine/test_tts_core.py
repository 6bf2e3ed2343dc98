"""The engine's speech half in-process with a fake speech runner: order, abort, errors, no ASR interference."""

from __future__ import annotations

import threading
import time

import numpy as np

from voxlane.config import EngineConfig
from voxlane.engine.core import EngineCore
from voxlane.engine.tts import SpeechChunk
from voxlane.messages import SpeechUnit, TranscribeOptions, WindowRequest
from voxlane.runners.fake import FakeRunner


class FakeSpeech:
    """1 s of silence per unit at 1000 Hz, after ``delay_s``; units whose ids are [666] fail."""

    def __init__(self, delay_s: float = 0.01) -> None:
        self.delay_s = delay_s
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def synthesize(self, unit: SpeechUnit) -> tuple[np.ndarray, int, list[int] | None]:
        with self.lock:
            self.calls.append((unit.request_id, unit.index))
        time.sleep(self.delay_s)
        if unit.phoneme_ids == [666]:
            raise ValueError("bad unit")
        return np.zeros(1000, dtype=np.int16), 1000, None


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


class SharedActivity:
    """Several runners (slots) reporting to one record of what ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: set[tuple[str, int]] = set()
        self.most = 0
        self.same_stream_overlap = False
        self.by: list[tuple[str, str, int]] = []

    def runner(self, name: str, delay_s: float) -> object:
        shared = self

        class Slot:
            def synthesize(self, unit: SpeechUnit) -> tuple[np.ndarray, int, list[int] | None]:
                key = (unit.request_id, unit.index)
                with shared.lock:
                    if any(rid == unit.request_id for rid, _ in shared.active):
                        shared.same_stream_overlap = True
                    shared.active.add(key)
                    shared.most = max(shared.most, len(shared.active))
                    shared.by.append((name, unit.request_id, unit.index))
                time.sleep(delay_s)
                with shared.lock:
                    shared.active.discard(key)
                return np.zeros(1000, dtype=np.int16), 1000, None

        return Slot()


def window_request(request_id: str, index: int, count: int) -> WindowRequest:
    return WindowRequest(request_id, index, count, index * 30.0, 30.0, 3000, 80, TranscribeOptions())


def _core_with(slots: int, solo: bool = False, mixed_slots: int = 1, delay_s: float = 0.05, asr_delay_s: float = 0.0):
    activity = SharedActivity()
    config = EngineConfig(model_path="", tts_mixed_slots=mixed_slots)
    runners = [activity.runner(f"slot{i}", delay_s) for i in range(slots)]
    solo_runner = activity.runner("solo", delay_s) if solo else None
    return EngineCore(FakeRunner(asr_delay_s), config, tts_runners=runners, tts_solo_runner=solo_runner), activity


def test_two_slots_run_two_streams_at_once_and_each_stream_in_order() -> None:
    core, activity = _core_with(2)
    now = time.monotonic()
    for rid in ("a", "b"):
        for i in range(4):
            core.add_unit(unit(rid, i, i == 3), now)
    out = run_until(core, lambda o: len(o) == 8)
    assert len(out) == 8
    assert activity.most == 2, "two streams' units never ran at once on two slots"
    assert not activity.same_stream_overlap, "two units of one stream ran at once"
    for rid in ("a", "b"):
        assert [c.msg.index for c in out if c.msg.request_id == rid] == [0, 1, 2, 3]


def test_a_lone_stream_runs_on_the_solo_runner_and_shares_once_another_arrives() -> None:
    core, activity = _core_with(2, solo=True)
    now = time.monotonic()
    for i in range(3):
        core.add_unit(unit("a", i, i == 2), now)
    run_until(core, lambda o: len(o) == 3)
    assert [name for name, _, _ in activity.by] == ["solo"] * 3
    activity.by.clear()
    now = time.monotonic()
    for rid in ("b", "c"):
        for i in range(3):
            core.add_unit(unit(rid, i, i == 2), now)
    run_until(core, lambda o: len(o) == 6)
    assert {name for name, _, _ in activity.by} <= {"slot0", "slot1", "solo"}
    assert any(name.startswith("slot") for name, _, _ in activity.by), "two streams both ran on the solo runner"
    assert activity.most == 2


def test_speech_keeps_to_its_mixed_share_while_asr_has_work() -> None:
    # a transcription window still running when speech is done
    core, activity = _core_with(2, solo=True, mixed_slots=1, asr_delay_s=2.0)
    now = time.monotonic()
    core.add_window(window_request("asr", 0, 1), np.zeros((80, 3000), dtype=np.float32), now)
    for rid in ("a", "b"):
        for i in range(3):
            core.add_unit(unit(rid, i, i == 2), now)
    run_until(core, lambda o: len(o) == 6)
    assert activity.most == 1, "speech used two slots while ASR had work"
    assert {name for name, _, _ in activity.by} != {"solo"}
