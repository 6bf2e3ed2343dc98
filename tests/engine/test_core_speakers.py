"""The engine's speaker thread: queued windows are embedded together (SPEAKER_WINDOWS at most), each gets
exactly one SpeakerResult, a window that fails fails alone, an aborted request's queued windows are dropped."""

from __future__ import annotations

import threading
import time

import numpy as np

from tests.engine.test_core import make_core
from voxlane.engine.core import SPEAKER_WINDOWS
from voxlane.messages import SpeakerResult, SpeakerWindow
from voxlane.runners.fake import FakeRunner


class _Encoder:
    """Embeds each span as [first frame, window's frame count]; a window of 13 frames raises. The first call
    waits for ``gate``, so that the windows behind it queue up."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.batches: list[int] = []

    def embed_windows(
        self, windows: list[tuple[np.ndarray, list[tuple[int, int]]]]
    ) -> list[tuple[np.ndarray, list[int]]]:
        self.gate.wait(5)
        self.batches.append(len(windows))
        if any(len(mel) == 13 for mel, _ in windows):
            raise ValueError("a bad window")
        return [
            (np.array([[a, len(mel)] for a, _ in spans], dtype=np.float32).reshape(-1, 2), [1] * len(spans))
            for mel, spans in windows
        ]


def _window(rid: str, index: int, n_frames: int, count: int) -> tuple[SpeakerWindow, np.ndarray]:
    return SpeakerWindow(rid, index, count, n_frames, [(index, index + 1)]), np.zeros((n_frames, 40), np.float32)


def test_queued_windows_are_embedded_together_each_with_its_own_result() -> None:
    core = make_core(FakeRunner())
    encoder = _Encoder()
    core.speaker_encoder = encoder  # type: ignore[assignment]
    sizes = [100, 200, 13, 300, 400, 500, 600]
    for i, n in enumerate(sizes):
        core.add_speaker_window(*_window("a", i, n, len(sizes)))
    core.add_speaker_window(*_window("gone", 0, 50, 9))
    core.add_speaker_window(*_window("gone", 1, 50, 9))
    core.abort("gone")
    encoder.gate.set()
    results: list[SpeakerResult] = []
    deadline = time.monotonic() + 5
    while len(results) < len(sizes) and time.monotonic() < deadline:
        results += [r for r in core.step(time.monotonic()) if isinstance(r, SpeakerResult)]
        time.sleep(0.001)
    time.sleep(0.05)  # nothing more comes: not the aborted request's windows
    results += [r for r in core.step(time.monotonic()) if isinstance(r, SpeakerResult)]
    assert sorted(r.index for r in results) == list(range(len(sizes)))
    assert {r.request_id for r in results} == {"a"}
    for r in results:
        if sizes[r.index] == 13:
            assert r.error == "the speaker encoder failed"
        else:
            assert r.error is None
            assert r.array().tolist() == [[r.index, sizes[r.index]]]
    assert max(encoder.batches) == SPEAKER_WINDOWS  # windows shared a batch
    assert encoder.batches.count(1) >= 1  # the failing batch was split to find its bad window


def test_a_requests_windows_wait_for_its_last_and_share_one_call() -> None:
    # Nothing holds the speaker thread: each window would be embedded on its own as it came, were the first
    # windows not held until the request's last is queued.
    core = make_core(FakeRunner())
    encoder = _Tagged(1.0)
    core.speaker_encoder = encoder  # type: ignore[assignment]
    core.add_speaker_window(*_window("a", 0, 100, 3))
    core.add_speaker_window(*_window("b", 0, 100, 1))  # another request's only window goes at once
    results = _results(core, 2)
    core.add_speaker_window(*_window("a", 1, 100, 3))
    core.add_speaker_window(*_window("a", 2, 100, 3))
    results += _results(core, 2)
    assert sorted((r.request_id, r.index) for r in results) == [("a", 0), ("a", 1), ("a", 2), ("b", 0)]
    assert encoder.batches == [2, 2]  # b with a's first window, then a's other two together
    assert core._speaker_arrived == {}


class _Tagged:
    """Embeds each span as [tag, first frame]."""

    def __init__(self, tag: float) -> None:
        self.tag = tag
        self.batches: list[int] = []

    def embed_windows(
        self, windows: list[tuple[np.ndarray, list[tuple[int, int]]]]
    ) -> list[tuple[np.ndarray, list[int]]]:
        self.batches.append(len(windows))
        return [(np.array([[self.tag, a] for a, _ in spans], np.float32), [1] * len(spans)) for _, spans in windows]


def _results(core, n: int) -> list[SpeakerResult]:
    results: list[SpeakerResult] = []
    deadline = time.monotonic() + 5
    while len(results) < n and time.monotonic() < deadline:
        results += [r for r in core.step(time.monotonic()) if isinstance(r, SpeakerResult)]
        time.sleep(0.001)
    return results


def test_count_check_windows_are_embedded_by_the_check_encoder() -> None:
    # A request's windows and the count check's stretches queued together (the speaker thread held until all
    # are queued, so that one run takes them all): each goes to its own encoder.
    core = make_core(FakeRunner())
    plain, checks = _Tagged(1.0), _Tagged(2.0)
    core.speaker_encoder, core.check_encoder = plain, checks  # type: ignore[assignment]
    gate = threading.Event()
    core._speaker_executor.submit(gate.wait, 5)
    for i in range(3):
        core.add_speaker_window(*_window("a", i, 100, 3))
    check = SpeakerWindow("c", 0, 1, 500, [(0, 250), (250, 500)], check=True)
    core.add_speaker_window(check, np.zeros((500, 120), np.float32))
    gate.set()
    results = {r.request_id + str(r.index): r for r in _results(core, 4)}
    assert plain.batches == [3] and checks.batches == [1]
    assert sorted(results) == ["a0", "a1", "a2", "c0"]
    assert results["c0"].array().tolist() == [[2.0, 0.0], [2.0, 250.0]]
    assert all(results[f"a{i}"].array().tolist() == [[1.0, i]] for i in range(3))


def test_without_a_check_encoder_a_check_window_fails_alone() -> None:
    core = make_core(FakeRunner())
    core.speaker_encoder = _Tagged(1.0)  # type: ignore[assignment]
    core.add_speaker_window(SpeakerWindow("c", 0, 1, 300, [(0, 300)], check=True), np.zeros((300, 120), np.float32))
    core.add_speaker_window(*_window("a", 0, 100, 1))
    results = {r.request_id: r for r in _results(core, 2)}
    assert results["c"].error == "this engine has no count check encoder"
    assert results["a"].error is None and results["a"].array().tolist() == [[1.0, 0.0]]
