"""The API process's named executors and the one door to blocking work: ``Executors.run``.

Nothing heavier than a dictionary lookup runs inside ``async def``: decoding, resampling, splitting and
log-mel features go through ``run("audio", ...)``; sentence splitting and phonemisation for speech through
``run("text", ...)`` (one worker process: espeak is not thread-safe, and it holds the GIL for up to 15 ms
per call, which the event loop would wait out); encoding synthesised speech through
``run_encode(request_id, ...)`` (worker processes, each stream pinned to one: PyAV holds the GIL through
parts of resampling and muxing); voice file work through ``run("files", ...)``. Each pool is owned here,
sized from config, and shut down here (queued work cancelled).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import zlib
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any, Callable, Literal, TypeVar

from voxlane.child import become_child
from voxlane.config import ServerConfig

T = TypeVar("T")
log = logging.getLogger(__name__)
# Workers yield to the event loop thread when both want a core: the loop's latency is the product.
WORKER_NICENESS = 5
PoolName = Literal["audio", "text", "files"]


class Executors:
    def __init__(self, config: ServerConfig) -> None:
        workers = config.audio_preprocess_workers
        self._audio_workers = workers
        self._text_workers = config.text_workers
        # One single-process pool per encode worker: a stream's encoder lives in one process.
        self._encoders = [_encode_worker() for _ in range(config.encode_workers)]
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
            "text": _text_pool(config.text_workers),
            # Voice files (upload staging, index writes, removal): always threads, whatever the audio
            # pool is, since these jobs hold open files and locks that cannot cross to a process.
            "files": ThreadPoolExecutor(1, thread_name_prefix="voxlane-files", initializer=_lower_priority),
        }

    async def run_encode(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(key, *args)`` on the encode worker that owns stream ``key`` (always the same one)."""
        index = zlib.crc32(key.encode()) % len(self._encoders)
        executor = self._encoders[index]
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, partial(fn, key, *args))
        except BrokenProcessPool:
            if self._encoders[index] is executor:
                log.error("encode worker %d died; starting a new one (its streams end)", index)
                self._encoders[index] = _encode_worker()
                executor.shutdown(wait=False, cancel_futures=True)
            raise

    async def run(self, pool: PoolName, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the named pool. If the awaiting task is cancelled before the job starts,
        the job never starts (asyncio cancels the pool's future). A process pool whose worker died is
        replaced, and the jobs it took down fail with ``BrokenProcessPool``; later jobs run."""
        loop = asyncio.get_running_loop()
        executor = self._pools[pool]
        try:
            return await loop.run_in_executor(executor, partial(fn, *args))
        except BrokenProcessPool:
            if self._pools[pool] is executor:
                log.error("the %s pool's worker process died; starting a new one", pool)
                self._pools[pool] = self._replacement(pool)
                executor.shutdown(wait=False, cancel_futures=True)
            raise

    def _replacement(self, pool: str) -> Executor:
        if pool == "text":
            return _text_pool(self._text_workers)
        return ProcessPoolExecutor(self._audio_workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_audio_worker)

    async def warm_up(self, voice_config_path: str) -> None:
        """Start the text worker and load espeak there now, so the first speech request does not pay ~1 s."""
        from voxlane.audio.encode import close_stream, open_stream
        from voxlane.text.phonemes import prepare

        await self.run("text", prepare, "Ready.", voice_config_path)
        for index, executor in enumerate(self._encoders):  # start each encode worker now, not on a request
            key = f"warm-up-{index}"
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(executor, partial(open_stream, key, "mp3", 22050, None))
            await loop.run_in_executor(executor, partial(close_stream, key))

    def shutdown(self) -> None:
        for pool in [*self._pools.values(), *self._encoders]:
            pool.shutdown(wait=False, cancel_futures=True)


def _lower_priority() -> None:
    """Raise this worker thread's (or process's) niceness; Linux sets it per thread."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)
    except OSError:
        pass


def _encode_worker() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_init_encode_worker)


def _init_encode_worker() -> None:
    become_child("voxlane-encode")
    _lower_priority()
    import voxlane.audio.encode  # noqa: F401


def _text_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_text_worker)


def _init_text_worker() -> None:
    become_child("voxlane-text")
    _lower_priority()
    import voxlane.text.phonemes  # noqa: F401


def _import_audio_modules() -> None:
    import av  # noqa: F401
    import soundfile  # noqa: F401
    import soxr  # noqa: F401

    import voxlane.audio.pipeline  # noqa: F401


def _init_audio_worker() -> None:
    """Per worker process: lower priority, and the heavy imports before the first job, not during it."""
    become_child("voxlane-audio")
    _lower_priority()
    _import_audio_modules()
