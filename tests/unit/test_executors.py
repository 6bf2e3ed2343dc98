"""The one door to blocking work: a request cancelled before its job starts never starts it."""

from __future__ import annotations

import asyncio
import threading
import time

from voxlane.config import EngineConfig, ServerConfig
from voxlane.server.executors import Executors


def test_cancelled_request_never_starts_its_job() -> None:
    config = ServerConfig(audio_preprocess_workers=1, engine=EngineConfig(model_path=""))
    executors = Executors(config)
    started: list[str] = []
    release = threading.Event()

    def blocker() -> None:
        started.append("blocker")
        release.wait(5)

    def victim() -> None:
        started.append("victim")

    async def scenario() -> None:
        busy = asyncio.ensure_future(executors.run("audio", blocker))
        await asyncio.sleep(0.05)  # the only worker is now busy
        queued = asyncio.ensure_future(executors.run("audio", victim))
        await asyncio.sleep(0.05)
        queued.cancel()  # the client went away while its job waited for a worker
        # Let the loop pass the cancellation on to the pool before the worker frees up: set at once, a
        # loaded machine could run the worker first (the test's race, not the server's, whose jobs are
        # cancelled long before a worker frees up).
        await asyncio.sleep(0.05)
        release.set()
        await busy
        await asyncio.sleep(0.1)

    try:
        asyncio.run(scenario())
        time.sleep(0.05)
        assert started == ["blocker"]
    finally:
        executors.shutdown()


def test_pools_have_their_names_and_sizes() -> None:
    config = ServerConfig(audio_preprocess_workers=2, engine=EngineConfig(model_path=""))
    executors = Executors(config)
    names: set[str] = set()

    async def scenario() -> None:
        for _ in range(4):
            names.add(await executors.run("audio", lambda: threading.current_thread().name))

    try:
        asyncio.run(scenario())
    finally:
        executors.shutdown()
    assert names and all(n.startswith("voxlane-audio") for n in names)


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
