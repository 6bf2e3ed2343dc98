"""The API process's named executors and the one door to blocking work: ``Executors.run``.

Nothing heavier than a dictionary lookup runs inside ``async def``: decoding, resampling, splitting and
log-mel features go through ``run("audio", ...)``; sentence splitting and phonemisation for speech through
``run("text", ...)`` (one worker: espeak is not thread-safe); encoding synthesised speech through
``run("encode", ...)``; voice file work through ``run("files", ...)``. Each pool is owned here, sized from
config, and shut down here (queued work cancelled).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Literal, TypeVar

from voxlane.config import ServerConfig

T = TypeVar("T")
# Workers yield to the event loop thread when both want a core: the loop's latency is the product.
WORKER_NICENESS = 5
PoolName = Literal["audio", "text", "encode", "files"]


class Executors:
    def __init__(self, config: ServerConfig) -> None:
        workers = config.audio_preprocess_workers
        self.kinds = {"audio": config.audio_preprocess_pool}
        audio: Executor
        if config.audio_preprocess_pool == "process":
            audio = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_init_audio_worker)
        else:
            _import_audio_modules()  # here, not on a worker: a first import holds the GIL for its whole run
            audio = ThreadPoolExecutor(workers, thread_name_prefix="voxlane-audio", initializer=_lower_priority)
        self._pools: dict[str, Executor] = {
            "audio": audio,
            "text": ThreadPoolExecutor(config.text_workers, thread_name_prefix="voxlane-text",
                                       initializer=_lower_priority),
            "encode": ThreadPoolExecutor(config.encode_workers, thread_name_prefix="voxlane-encode",
                                         initializer=_lower_priority),
            # Voice files (upload staging, index writes, removal): always threads, whatever the audio
            # pool is, since these jobs hold open files and locks that cannot cross to a process.
            "files": ThreadPoolExecutor(1, thread_name_prefix="voxlane-files", initializer=_lower_priority),
        }

    async def run(self, pool: PoolName, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the named pool. If the awaiting task is cancelled before the job starts,
        the job never starts (asyncio cancels the pool's future)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pools[pool], partial(fn, *args))

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


def _lower_priority() -> None:
    """Raise this worker thread's (or process's) niceness; Linux sets it per thread."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)
    except OSError:
        pass


def _import_audio_modules() -> None:
    import av  # noqa: F401
    import soundfile  # noqa: F401
    import soxr  # noqa: F401

    import voxlane.audio.pipeline  # noqa: F401


def _init_audio_worker() -> None:
    """Per worker process: lower priority, and the heavy imports before the first job, not during it."""
    _lower_priority()
    _import_audio_modules()
