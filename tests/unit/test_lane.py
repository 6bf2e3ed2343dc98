"""The live pool (server/lane.py): its jobs run on its threads, a job whose caller went away before it
started never starts, an error reaches the caller, and results that end together wake the loop once."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from functools import partial

import pytest

from tests.unit.test_executors import queue_behind_a_blocker
from voxlane.config import EngineConfig, ServerConfig
from voxlane.server.executors import Executors
from voxlane.server.lane import Lane


def test_live_jobs_run_at_once_on_the_live_threads_and_their_errors_reach_the_caller() -> None:
    executors = Executors(ServerConfig(audio_preprocess_workers=3, engine=EngineConfig(model_path="")))
    barrier = threading.Barrier(3, timeout=10)  # passed only if three workers run the jobs at once

    def name_at_barrier() -> str:
        barrier.wait()
        return threading.current_thread().name

    def fails() -> None:
        raise ValueError("not pcm16")

    async def scenario() -> list[str]:
        names = await asyncio.gather(*(executors.run("live", name_at_barrier) for _ in range(3)))
        with pytest.raises(ValueError, match="not pcm16"):
            await executors.run("live", fails)
        return names

    try:
        names = asyncio.run(scenario())
    finally:
        executors.shutdown()
    assert len(set(names)) == 3 and all(n.startswith("voxlane-live_") for n in names)


def test_a_live_job_whose_caller_went_away_before_it_started_never_starts() -> None:
    executors = Executors(ServerConfig(audio_preprocess_workers=1, engine=EngineConfig(model_path="")))
    started: list[str] = []

    async def scenario() -> None:
        busy, queued, release = await queue_behind_a_blocker(executors, "live", started)
        queued.cancel()  # the session ended while its chunk waited for a worker
        release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await queued
        await busy
        assert await executors.run("live", started.append, "after") is None  # the worker goes on

    try:
        asyncio.run(scenario())
    finally:
        executors.shutdown()
    assert started == ["blocker", "after"]


def test_jobs_that_end_while_the_loop_is_busy_wake_it_once() -> None:
    lane = Lane(2, thread_name_prefix="test-lane")
    wakes: list[object] = []

    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counted(callback: Callable[..., object], *args: object) -> asyncio.Handle:
            wakes.append(callback)
            return real(callback, *args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        ended = threading.Barrier(3, timeout=10)

        def job(i: int) -> int:
            ended.wait()
            return i

        jobs = [lane.start(partial(job, i)) for i in range(2)]
        ended.wait()  # both jobs are at their end
        deadline = time.monotonic() + 10
        while _handed_back(lane) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # the loop held on purpose, until both results wait for it
        return [await job.future for job in jobs]

    try:
        assert asyncio.run(scenario()) == [0, 1]
    finally:
        lane.shutdown()
    assert len(wakes) == 1  # the second result rode the first one's wake-up


def _handed_back(lane: Lane) -> int:
    with lane._lock:
        return sum(len(ended) for ended in lane._ended.values())
