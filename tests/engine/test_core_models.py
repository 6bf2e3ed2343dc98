"""Several Whisper models in one engine: a window of a model not loaded waits for its load on the
loader thread, then runs on that model; batches never mix models; idle models unload after their TTL or to
make room, never while they have work."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from tests.engine.test_core import FEATURES, run_until_idle, step_until
from voxlane.config import EngineConfig
from voxlane.engine.core import EngineCore
from voxlane.messages import (
    LoadModel,
    ModelLoaded,
    ModelUnloaded,
    TranscribeOptions,
    UnloadModel,
    WindowRequest,
    WindowResult,
)
from voxlane.runners.base import WindowOutput, WindowPass
from voxlane.runners.fake import FakeRunner

DEFAULT = "/models/default"


class ModelRunner(FakeRunner):
    """A fake runner that records the model each window of each batch asked for."""

    def __init__(self, name: str, delay_s: float = 0.0) -> None:
        super().__init__(delay_s)
        self.name = name
        self.models: list[set[str]] = []

    def run(self, batch: Sequence[WindowPass]) -> list[WindowOutput]:
        self.models.append({w.msg.model for w in batch})
        return super().run(batch)


class Loader:
    """Loads ``ModelRunner``s after ``delay_s``; a model named in ``fail`` raises."""

    def __init__(self, delay_s: float = 0.05, fail: frozenset[str] = frozenset()) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.runners: dict[str, list[ModelRunner]] = {}
        self.threads: set[str] = set()

    def __call__(self, model: str) -> ModelRunner:
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay_s)
        if model in self.fail:
            raise RuntimeError("not a model")
        runner = ModelRunner(model)
        self.runners.setdefault(model, []).append(runner)
        return runner


def window(request_id: str, index: int, count: int, model: str = "") -> WindowRequest:
    return WindowRequest(request_id, index, count, index * 30.0, 30.0, 3000, 80, TranscribeOptions(), model=model)


def make(loader: Loader, **overrides: object) -> tuple[EngineCore, ModelRunner]:
    default = ModelRunner(DEFAULT)
    config = EngineConfig(model_path=DEFAULT, max_batch_size=8, max_batch_wait_ms=0.0, **overrides)  # type: ignore[arg-type]
    return EngineCore(default, config, load_runner=loader), default


def test_windows_of_two_models_each_run_on_their_own_model_and_never_share_a_batch() -> None:
    loader = Loader(delay_s=0.1)
    core, default = make(loader)
    core.load_model(LoadModel("q", "/models/base"), time.monotonic())
    run_until_idle(core)  # both loaded: their windows queue side by side
    now = time.monotonic()
    for i in range(4):  # interleaved, as two clients' requests arrive
        core.add_window(window("base", i, 4, "/models/base"), FEATURES, now)
        core.add_window(window("tiny", i, 4), FEATURES, now)
    results = run_until_idle(core)
    assert sorted((r.request_id, r.index) for r in results) == sorted(
        (rid, i) for rid in ("base", "tiny") for i in range(4)
    )
    assert all(r.error is None for r in results)
    (base,) = loader.runners["/models/base"]
    assert {rid for batch in base.batches for rid, _ in batch} == {"base"}
    assert {rid for batch in default.batches for rid, _ in batch} == {"tiny"}
    assert all(len(models) == 1 for models in base.models + default.models)  # no batch mixes models
    assert loader.threads == {"voxlane-engine-loader_0"}  # loaded off the loop thread


def test_load_model_is_answered_at_once_when_loaded_and_after_the_load_otherwise() -> None:
    loader = Loader(delay_s=0.1)
    core, _ = make(loader)
    now = time.monotonic()
    assert core.load_model(LoadModel("q0", DEFAULT), now) == ModelLoaded("q0", DEFAULT)
    assert core.load_model(LoadModel("q1", "/models/base"), now) is None
    results = run_until_idle(core)
    assert ModelLoaded("q1", "/models/base") in results
    assert core.load_model(LoadModel("q2", "/models/base"), time.monotonic()) == ModelLoaded("q2", "/models/base")


def test_an_idle_model_unloads_after_its_ttl_and_loads_again_on_its_next_window() -> None:
    loader = Loader()
    core, _ = make(loader, model_ttl_s=10.0)
    core.add_window(window("a", 0, 1, "/models/base"), FEATURES, time.monotonic())
    run_until_idle(core)
    assert core.models.loaded == [DEFAULT, "/models/base"]
    now = time.monotonic()
    assert 9.0 < core.next_timeout(now) <= 10.0  # the loop wakes for the TTL
    core.step(now + 9.0)
    assert core.models.loaded == [DEFAULT, "/models/base"]
    core.step(now + 10.5)
    assert core.models.loaded == [DEFAULT]  # the default model never unloads
    core.add_window(window("b", 0, 1, "/models/base"), FEATURES, time.monotonic())
    results = run_until_idle(core)
    assert [r.request_id for r in results if isinstance(r, WindowResult)] == ["b"]
    state = {s.model: s for s in core.stats().models}["/models/base"]
    assert (state.loaded, state.loads, state.unloads) == (True, 2, 1)
    assert len(loader.runners["/models/base"]) == 2


def test_the_least_recently_used_idle_model_makes_room_and_a_busy_one_never_does() -> None:
    loader = Loader()
    core, _ = make(loader, max_loaded_models=2)
    core.add_window(window("b", 0, 1, "/models/b"), FEATURES, time.monotonic())
    run_until_idle(core)
    core.add_window(window("c", 0, 1, "/models/c"), FEATURES, time.monotonic())
    run_until_idle(core)
    assert core.models.loaded == [DEFAULT, "/models/c"]  # b was idle: it made room
    (c,) = loader.runners["/models/c"]
    c.delay_s = 0.3  # c busy with a window while d is wanted: d waits for it
    core.add_window(window("c2", 0, 1, "/models/c"), FEATURES, time.monotonic())
    core.step(time.monotonic())
    core.add_window(window("d", 0, 1, "/models/d"), FEATURES, time.monotonic())
    core.step(time.monotonic())
    assert "/models/d" not in loader.runners and core.models.loaded == [DEFAULT, "/models/c"]
    results = run_until_idle(core)
    assert sorted(r.request_id for r in results if isinstance(r, WindowResult)) == ["c2", "d"]
    assert core.models.loaded == [DEFAULT, "/models/d"]


def test_a_model_that_fails_to_load_fails_its_windows_and_its_waiters_alone() -> None:
    loader = Loader(fail=frozenset({"/models/bad"}))
    core, _ = make(loader)
    now = time.monotonic()
    core.add_window(window("bad", 0, 1, "/models/bad"), FEATURES, now)
    assert core.load_model(LoadModel("q", "/models/bad"), now) is None
    core.add_window(window("ok", 0, 1), FEATURES, now)
    results = run_until_idle(core)
    by_id = {r.request_id: r for r in results}
    assert by_id["ok"].error is None
    assert "could not load the Whisper model" in (by_id["bad"].error or "")
    assert "not a model" in (by_id["q"].error or "")
    assert core.models.loaded == [DEFAULT]


@pytest.mark.parametrize("model", ["", DEFAULT])
def test_the_default_model_is_named_by_nothing_or_its_path(model: str) -> None:
    core, default = make(Loader())
    core.add_window(window("a", 0, 1, model), FEATURES, time.monotonic())
    run_until_idle(core)
    assert default.batches == [[("a", 0)]]


def test_a_model_nobody_waits_for_any_more_is_not_loaded() -> None:
    loader = Loader(delay_s=0.1)
    core, _ = make(loader)
    core.add_window(window("gone", 0, 1, "/models/base"), FEATURES, time.monotonic())
    core.abort("gone")
    assert run_until_idle(core) == []
    assert "/models/base" not in loader.runners


def test_unload_model_unloads_an_idle_model_now_and_its_next_window_loads_it_again() -> None:
    loader = Loader()
    core, _ = make(loader)
    core.load_model(LoadModel("q", "/models/base"), time.monotonic())
    run_until_idle(core)
    assert core.unload_model(UnloadModel("u1", "/models/base")) == ModelUnloaded("u1", "/models/base", True)
    assert core.models.loaded == [DEFAULT]
    assert loader.runners["/models/base"][0].closed
    state = {s.model: s for s in core.stats().models}["/models/base"]
    assert (state.loaded, state.memory_bytes, state.unloads) == (False, 0, 1)
    # Not loaded any more: nothing to do, and not counted again.
    assert core.unload_model(UnloadModel("u2", "/models/base")) == ModelUnloaded("u2", "/models/base", False)
    assert core.unload_model(UnloadModel("u3", "/models/never")) == ModelUnloaded("u3", "/models/never", False)
    assert {s.model: s for s in core.stats().models}["/models/base"].unloads == 1
    core.add_window(window("b", 0, 1, "/models/base"), FEATURES, time.monotonic())
    results = run_until_idle(core)
    assert [(r.request_id, r.error) for r in results if isinstance(r, WindowResult)] == [("b", None)]
    assert len(loader.runners["/models/base"]) == 2


def test_unload_model_refuses_the_default_model() -> None:
    core, default = make(Loader())
    answer = core.unload_model(UnloadModel("u", DEFAULT))
    assert answer.refused is not None and "default" in answer.refused and not answer.was_loaded
    assert core.models.loaded == [DEFAULT] and not default.closed
    core.add_window(window("a", 0, 1), FEATURES, time.monotonic())
    assert [r.error for r in run_until_idle(core)] == [None]


def test_unload_model_refuses_a_model_with_work_in_flight_and_its_windows_finish() -> None:
    loader = Loader(delay_s=0.1)
    core, _ = make(loader)
    core.add_window(window("a", 0, 1, "/models/base"), FEATURES, time.monotonic())
    core.step(time.monotonic())  # its load is under way
    assert "in flight" in (core.unload_model(UnloadModel("u1", "/models/base")).refused or "")
    step_until(core, lambda: core.models.is_loaded("/models/base"))
    (base,) = loader.runners["/models/base"]
    base.delay_s = 0.2
    core.add_window(window("b", 0, 1, "/models/base"), FEATURES, time.monotonic())
    results = core.step(time.monotonic())  # b's batch runs for 0.2 s
    assert "in flight" in (core.unload_model(UnloadModel("u2", "/models/base")).refused or "")
    results += run_until_idle(core)
    assert sorted((r.request_id, r.error) for r in results if isinstance(r, WindowResult)) == [
        ("a", None),
        ("b", None),
    ]
    assert not base.closed
    assert core.unload_model(UnloadModel("u3", "/models/base")).was_loaded  # idle now: it unloads
