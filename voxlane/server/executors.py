"""The API process's named executors and the one door to blocking work: ``Executors.run``.

Nothing heavier than a dictionary lookup runs inside ``async def``: decoding, resampling, splitting and
log-mel features go through ``run("audio", ...)``; sentence splitting and phonemisation for speech through
``run("text", ...)`` (one worker: espeak is not thread-safe); encoding synthesised speech through
``run("encode", ...)``. Each pool is owned here, sized from config, and shut down here (queued work cancelled).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Literal, TypeVar

from voxlane.config import ServerConfig

T = TypeVar("T")
PoolName = Literal["audio", "text", "encode"]


class Executors:
    def __init__(self, config: ServerConfig) -> None:
        workers = config.audio_preprocess_workers
        self.kinds = {"audio": config.audio_preprocess_pool}
        audio: Executor
        if config.audio_preprocess_pool == "process":
            audio = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_warm_audio_worker)
        else:
            audio = ThreadPoolExecutor(workers, thread_name_prefix="voxlane-audio")
        self._pools: dict[str, Executor] = {
            "audio": audio,
            "text": ThreadPoolExecutor(config.text_workers, thread_name_prefix="voxlane-text"),
            "encode": ThreadPoolExecutor(config.encode_workers, thread_name_prefix="voxlane-encode"),
        }

    async def run(self, pool: PoolName, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the named pool. If the awaiting task is cancelled before the job starts,
        the job never starts (asyncio cancels the pool's future)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pools[pool], partial(fn, *args))

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


def _warm_audio_worker() -> None:
    """Import the heavy modules once per worker process, not on its first job."""
    import voxlane.audio.pipeline  # noqa: F401
