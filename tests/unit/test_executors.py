"""The one door to blocking work: a request cancelled before its job starts never starts it."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from voxlane.config import EngineConfig, ServerConfig
from voxlane.server.executors import Executors


async def queue_behind_a_blocker(
    executors: Executors, pool: str, started: list[str]
) -> tuple[asyncio.Future[None], asyncio.Future[None], threading.Event]:
    """Hold ``pool``'s only worker with a job that waits for the returned event, then queue a victim's job
    (``started.append("victim")``) behind it; returns the blocker's and the victim's callers and the event."""
    blocking, release = threading.Event(), threading.Event()

    def blocker() -> None:
        started.append("blocker")
        blocking.set()
        release.wait(5)

    busy = asyncio.ensure_future(executors.run(pool, blocker))
    await asyncio.sleep(0)  # one loop step: ``busy`` submits its job
    assert blocking.wait(5)  # the only worker is now busy
    queued = asyncio.ensure_future(executors.run(pool, started.append, "victim"))
    await asyncio.sleep(0)  # one loop step: ``queued`` submits its job, which waits for the worker
    assert next(load for load in executors.load() if load.pool == pool).queued == 1
    return busy, queued, release


def test_cancelled_request_never_starts_its_job() -> None:
    config = ServerConfig(audio_preprocess_workers=1, engine=EngineConfig(model_path=""))
    executors = Executors(config)
    pool = executors._pools["audio"]
    started: list[str] = []

    async def scenario() -> None:
        busy, queued, release = await queue_behind_a_blocker(executors, "audio", started)
        after = pool.submit(started.append, "after")  # behind the victim in the pool's queue
        queued.cancel()  # the client went away while its job waited for a worker
        # The worker frees up in the same tick as the cancel: the loop is held here (a blocking wait on
        # purpose) until the worker has passed the victim's place in the queue and run the next job. A
        # cancel passed on to the pool a loop iteration later would come after the victim had run.
        release.set()
        after.result(timeout=10)
        with contextlib.suppress(asyncio.CancelledError):
            await queued
        await busy

    try:
        asyncio.run(scenario())
        assert started == ["blocker", "after"]
    finally:
        executors.shutdown()


def test_pools_have_their_names_and_sizes() -> None:
    config = ServerConfig(
        audio_preprocess_workers=3, text_workers=2, encode_workers=3, engine=EngineConfig(model_path="")
    )
    executors = Executors(config)
    # Three jobs pass a barrier of three only if three workers run them at once.
    barrier = threading.Barrier(3, timeout=10)

    def name_at_barrier() -> str:
        barrier.wait()
        return threading.current_thread().name

    async def scenario() -> list[str]:
        return await asyncio.gather(*(executors.run("audio", name_at_barrier) for _ in range(3)))

    try:
        names = asyncio.run(scenario())
        workers = {load.pool: load.workers for load in executors.load()}
        sizes = {name: getattr(pool, "_max_workers", None) for name, pool in executors._pools.items()}
    finally:
        executors.shutdown()
    assert len(set(names)) == 3 and all(n.startswith("voxlane-audio") for n in names)
    assert sizes["audio"] == sizes["live"] == workers["audio"] == workers["live"] == 3  # --audio-preprocess-workers
    assert sizes["text"] == workers["text"] == 2  # ServerConfig.text_workers (no flag)
    encoders = sorted(name for name in sizes if name.startswith("encode-"))
    assert encoders == ["encode-0", "encode-1", "encode-2"]  # --encode-workers, one process each
    assert all(sizes[name] == workers[name] == 1 for name in encoders)


def test_an_encode_worker_that_dies_takes_only_its_streams_with_it() -> None:
    import os
    import signal
    import zlib
    from concurrent.futures.process import BrokenProcessPool

    import numpy as np
    import pytest

    from voxlane.audio.encode import close_stream, encode_stream, finish_stream, open_stream

    executors = Executors(ServerConfig(encode_workers=2, engine=EngineConfig(model_path="")))
    pcm = (np.sin(np.arange(22050) / 10) * 3000).astype(np.int16)

    async def one_stream(key: str) -> bytes:
        await executors.run_encode(key, open_stream, "mp3", 22050, None)
        data = await executors.run_encode(key, encode_stream, pcm) + await executors.run_encode(key, finish_stream)
        await executors.run_encode(key, close_stream)
        return data

    async def scenario() -> None:
        assert len(await one_stream("first")) > 1000
        key = next(k for k in (f"s{i}" for i in range(100)) if zlib.crc32(k.encode()) % 2 == 0)
        other = next(k for k in (f"s{i}" for i in range(100)) if zlib.crc32(k.encode()) % 2 == 1)
        await executors.run_encode(key, open_stream, "mp3", 22050, None)
        await executors.run_encode(other, open_stream, "mp3", 22050, None)
        victim = executors._encoders[0]
        [pid] = victim._processes  # the worker process that holds ``key``'s encoder
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            await executors.run_encode(key, encode_stream, pcm)
        assert executors._encoders[0] is not victim  # replaced
        assert await executors.run_encode(other, encode_stream, pcm) is not None  # the other worker's stream lives
        assert len(await one_stream("after")) > 1000 and len(await one_stream(key)) > 1000

    try:
        asyncio.run(scenario())
    finally:
        executors.shutdown()
