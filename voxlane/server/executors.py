"""The API process's named executors and the one door to blocking work: ``Executors.run``.

Nothing heavier than a dictionary lookup runs inside ``async def``: decoding, resampling, splitting and
log-mel features go through ``run("audio", ...)``; a live transcription session's chunks (base64,
resampling, VAD) and its decodes' features through ``run("live", ...)`` (threads: a session's front end
keeps state between chunks, and its short jobs do not wait behind long uploads); sentence splitting and
phonemisation for speech through ``run("text", ...)`` (one worker process: espeak is not thread-safe,
and it holds the GIL for up to 15 ms per call, which the event loop would wait out); encoding synthesised speech through
``run_encode(request_id, ...)`` (worker processes, each stream pinned to one: PyAV holds the GIL through
parts of resampling and muxing); voice file work through ``run("files", ...)``; the /metrics page through
``run("metrics", ...)`` (one thread: rendering holds the GIL, and from a thread the loop gets it back every
switch interval instead of waiting out the whole page); uploads written to shared memory for the audio
worker processes through ``run("transfer", ...)`` (audio/shared.py). Each pool is owned here,
sized from config, and shut down here (queued work cancelled). ``load()`` says how busy each pool is, for
/metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import multiprocessing
import os
import threading
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from voxlane.audio import shared
from voxlane.blas import limit_blas_threads
from voxlane.child import become_child
from voxlane.config import ServerConfig
from voxlane.server.lane import Lane

T = TypeVar("T")
log = logging.getLogger(__name__)
TRANSFER_WORKERS = 2
PoolName = Literal["audio", "live", "text", "files", "metrics", "transfer"]


@dataclass(frozen=True)
class PoolLoad:
    pool: str
    workers: int
    busy: int
    """Workers running a job."""
    queued: int
    """Jobs waiting for a worker."""


class Executors:
    def __init__(self, config: ServerConfig) -> None:
        workers = config.audio_preprocess_workers
        # log-mel features run on these pools: numpy's BLAS threads would spin beside them (voxlane/blas.py)
        limit_blas_threads(config.blas_threads)
        per_process = (config.blas_threads, config.worker_niceness)
        """What each worker process is given: numpy's BLAS threads and its niceness."""
        nicer = partial(_lower_priority, config.worker_niceness)
        self._workers = {
            "audio": workers,
            "live": workers,
            "text": config.text_workers,
            "files": 1,
            "metrics": 1,
            "transfer": TRANSFER_WORKERS,
        }
        """Workers per pool, for ``load()``."""
        # How to (re)build each pool; a process pool whose worker died is rebuilt from here.
        self._factories: dict[str, Callable[[], Executor]] = {}
        self.shared_audio = config.audio_preprocess_pool == "process" and shared.usable()
        """Whether audio jobs hand samples and features over in shared memory (audio/shared.py)."""
        if self.shared_audio:
            removed = shared.sweep()
            if removed:
                log.info("removed %d block(s) of shared memory left by a voxlane server that is gone", removed)
        if config.audio_preprocess_pool == "process":
            self._factories["audio"] = partial(_process_pool, workers, "voxlane-audio", per_process, *_AUDIO_MODULES)
        else:
            _import_modules(*_AUDIO_MODULES)  # here, not on a worker: a first import holds the GIL throughout
            self._factories["audio"] = partial(
                ThreadPoolExecutor, workers, thread_name_prefix="voxlane-audio", initializer=nicer
            )
        # Live transcription sessions (realtime): each holds a resampler and a VAD state between its chunks,
        # which cannot cross to a process, and its short jobs must not wait behind long uploads' decodes.
        # Ten jobs a second per session: a Lane costs the loop less per job than a ThreadPoolExecutor.
        self._factories["live"] = partial(Lane, workers, thread_name_prefix="voxlane-live", initializer=nicer)
        self._factories["text"] = partial(
            _process_pool, config.text_workers, "voxlane-text", per_process, *_TEXT_MODULES
        )
        # Voice files (upload staging, index writes, removal): always threads, whatever the audio pool is,
        # since these jobs hold open files and locks that cannot cross to a process.
        self._factories["files"] = partial(ThreadPoolExecutor, 1, thread_name_prefix="voxlane-files", initializer=nicer)
        # Uploads written to shared memory for the audio processes (audio/shared.py): a write to tmpfs holds
        # no GIL, but it is a syscall of a millisecond for a few MB, so not on the loop.
        self._factories["transfer"] = partial(
            ThreadPoolExecutor, TRANSFER_WORKERS, thread_name_prefix="voxlane-transfer", initializer=nicer
        )
        # Not niced: rendering is pure Python with the GIL held throughout, so the loop cannot run beside it
        # anyway, and a niced thread would more often be taken off the CPU while it holds the GIL.
        self._factories["metrics"] = partial(ThreadPoolExecutor, 1, thread_name_prefix="voxlane-metrics")
        # One single-process pool per encode worker: a stream's encoder lives in one process.
        self._encode_names = [f"encode-{i}" for i in range(config.encode_workers)]
        for name in self._encode_names:
            self._factories[name] = partial(_process_pool, 1, "voxlane-encode", per_process, "voxlane.audio.encode")
            self._workers[name] = 1
        self._pools: dict[str, Executor] = {name: make() for name, make in self._factories.items()}
        self._in_flight: Counter[str] = Counter(dict.fromkeys(self._pools, 0))
        """Jobs submitted to each pool and still awaited (counted on the event loop; every key exists from
        here on, so the metrics thread can read them while the loop counts)."""

    @property
    def _encoders(self) -> list[Executor]:
        return [self._pools[name] for name in self._encode_names]

    async def run(
        self, pool: PoolName, fn: Callable[..., T], *args: Any, on_abandon: Callable[[], None] | None = None
    ) -> T:
        """Run ``fn(*args)`` on the named pool. If the awaiting task is cancelled before the job starts,
        the job never starts (the pool's future is cancelled in the same tick as the task, so a worker
        that frees up meanwhile skips it); if it is cancelled while the job runs, ``on_abandon`` is called
        once the job has ended (on the pool's thread), for what the job leaves that nobody will take (its
        blocks of shared memory). A process pool whose worker died is replaced,
        and the jobs it took down fail with ``BrokenProcessPool``; later jobs run."""
        return await self._run(pool, fn, *args, on_abandon=on_abandon)

    async def run_encode(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(key, *args)`` on the encode worker that owns stream ``key`` (always the same one)."""
        name = self._encode_names[zlib.crc32(key.encode()) % len(self._encode_names)]
        return await self._run(name, fn, key, *args)

    async def _run(
        self, name: str, fn: Callable[..., T], *args: Any, on_abandon: Callable[[], None] | None = None
    ) -> T:
        executor = self._pools[name]
        self._in_flight[name] += 1
        if isinstance(executor, Lane):
            try:
                return await executor.start(partial(fn, *args), on_abandon).future
            finally:
                self._in_flight[name] -= 1
        job: Future[T] | None = None
        try:
            job = executor.submit(partial(fn, *args))  # raises BrokenProcessPool at once on a broken pool
            return await _JobWaiter(job)
        except asyncio.CancelledError:
            if job is not None:
                job.cancel()  # done already by _JobWaiter.cancel; kept for a cancel that came another way
                if on_abandon is not None:
                    job.add_done_callback(lambda _: on_abandon())  # at once if the job never started
            raise
        except BrokenProcessPool:
            if self._pools[name] is executor:
                log.error("a worker process of the %s pool died; starting a new pool (its jobs fail)", name)
                self._pools[name] = self._factories[name]()
                executor.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            self._in_flight[name] -= 1

    def load(self) -> list[PoolLoad]:
        """How busy each pool is now. A pool starts a job whenever a worker is free, so of the jobs awaited
        on it the first ``workers`` run and the rest wait. (A job whose caller was cancelled while it ran
        finishes uncounted: the pool cannot stop it, and nobody waits for it.)"""
        loads = []
        for name, workers in self._workers.items():
            jobs = self._in_flight[name]
            loads.append(PoolLoad(name, workers, min(jobs, workers), max(0, jobs - workers)))
        return loads

    async def warm_up(self, voice_config_path: str) -> None:
        """Start the text and encode workers now (espeak's data loaded, codecs opened once), so the first
        speech request does not pay ~1 s for it; load the VAD model on the audio pool."""
        from voxlane.audio.encode import close_stream, open_stream
        from voxlane.audio.pipeline import warm_up as warm_up_audio
        from voxlane.text.phonemes import prepare

        await self.run("audio", warm_up_audio)
        await self.run("text", prepare, "Ready.", voice_config_path)
        for name in self._encode_names:
            await self._run(name, open_stream, "warm-up", "mp3", 22050, None)
            await self._run(name, close_stream, "warm-up")

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        if self.shared_audio:
            shared.sweep(own=True)


class _JobWaiter(asyncio.Future[T]):
    """What ``_run`` awaits: the pool's future seen from the loop. ``asyncio.wrap_future`` passes a
    cancellation on to the pool one loop iteration after ``task.cancel()``, and a worker that frees up in
    between starts the job anyway; ``task.cancel()`` calls this waiter's ``cancel()`` at once, so here the
    pool's future is cancelled in the same tick, and a job not yet started never starts."""

    def __init__(self, job: Future[T]) -> None:
        super().__init__()
        self._job = job
        loop = self.get_loop()

        def done(job: Future[T]) -> None:  # on the pool's thread, or here if the job is done already
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody awaits this job any more
                loop.call_soon_threadsafe(self._copy, job)

        job.add_done_callback(done)

    def _copy(self, job: Future[T]) -> None:
        if self.done():
            return
        if job.cancelled():
            super().cancel()
        elif (error := job.exception()) is not None:
            self.set_exception(error)
        else:
            self.set_result(job.result())

    def cancel(self, msg: Any | None = None) -> bool:
        self._job.cancel()  # refused (False) if the job runs already: then the pool finishes it unawaited
        return super().cancel(msg)


def _lower_priority(niceness: int) -> None:
    """Raise this worker thread's (or process's) niceness (--worker-niceness); Linux sets it per thread."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)


_AUDIO_MODULES = ("av", "soundfile", "soxr", "voxlane.audio.pipeline", "voxlane.audio.shared")
# Piper's phonemiser (and the onnxruntime its package pulls in) loads in the text workers only: phonemes.py
# imports it lazily so that the API process never does.
_TEXT_MODULES = ("piper.phonemize_espeak", "piper.phoneme_ids", "voxlane.text.phonemes")


def _process_pool(workers: int, name: str, per_process: tuple[int, int], *modules: str) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker_process,
        initargs=(name, os.getpid(), *per_process, modules),
    )


def _init_worker_process(
    name: str, parent_pid: int, blas_threads: int, niceness: int, modules: tuple[str, ...]
) -> None:
    """Per worker process: a named child that dies with the API process, lower priority, numpy's BLAS
    threads as in the API process, and the heavy imports before the first job, not during it."""
    become_child(name, parent_pid)
    _lower_priority(niceness)
    limit_blas_threads(blas_threads)
    _import_modules(*modules)


def _import_modules(*modules: str) -> None:
    for module in modules:
        importlib.import_module(module)
