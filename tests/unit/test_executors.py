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
