"""A pool of threads for many short jobs awaited on the event loop: the live sessions' chunks.

Per job, ``ThreadPoolExecutor.submit`` makes a concurrent ``Future`` (its ``Condition`` and lock) and a work
item, and the job's end wakes the loop with ``call_soon_threadsafe`` (a write to its self-pipe), all of it
with the GIL held, on the loop or beside it. A live session sends ten chunks a second, each one job, so
those costs grow with the sessions. Here a job is a small object on a ``SimpleQueue`` whose result is set
on an asyncio future, and the jobs that end before the loop has taken the previous results ride the same
wake-up: the busier the loop, the fewer wake-ups per job.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LaneJob(Generic[T]):
    __slots__ = ("fn", "future", "loop", "on_abandon")

    def __init__(
        self, fn: Callable[[], T], loop: asyncio.AbstractEventLoop, on_abandon: Callable[[], None] | None
    ) -> None:
        self.fn = fn
        self.loop = loop
        self.future: asyncio.Future[T] = loop.create_future()
        self.on_abandon = on_abandon


class Lane(Executor):
    """``workers`` threads named ``{thread_name_prefix}_{i}``, started with the first job, each running
    ``initializer`` first. ``start`` queues a job and returns it; the caller awaits ``job.future``. A job
    whose future was cancelled before a worker took it never runs; its ``on_abandon``, if any, is called
    once a job whose future was cancelled has ended or been skipped (on the worker, or on the loop when
    the cancel came after the job ended)."""

    def __init__(self, workers: int, thread_name_prefix: str, initializer: Callable[[], None] | None = None) -> None:
        self._max_workers = workers
        self._prefix = thread_name_prefix
        self._initializer = initializer
        self._jobs: queue.SimpleQueue[LaneJob[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._ended: dict[asyncio.AbstractEventLoop, list[tuple[LaneJob[Any], bool, Any]]] = {}
        """Results not yet handed to each loop; a loop has an entry while a hand-over is scheduled on it."""
        self._threads: list[threading.Thread] = []
        self._closed = False

    def start(self, fn: Callable[[], T], on_abandon: Callable[[], None] | None = None) -> LaneJob[T]:
        """Queue ``fn()``; call from the event loop that awaits the job's future."""
        if self._closed:
            raise RuntimeError("cannot schedule new jobs after shutdown")
        job = LaneJob(fn, asyncio.get_running_loop(), on_abandon)
        if not self._threads:
            self._start_threads()
        self._jobs.put(job)
        return job

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        if cancel_futures:
            with contextlib.suppress(queue.Empty):
                while (job := self._jobs.get_nowait()) is not None:
                    with contextlib.suppress(RuntimeError):  # its loop has closed: nobody awaits it
                        job.loop.call_soon_threadsafe(job.future.cancel)
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def _start_threads(self) -> None:
        for i in range(self._max_workers):
            thread = threading.Thread(target=self._work, name=f"{self._prefix}_{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        if self._initializer is not None:
            self._initializer()
        while (job := self._jobs.get()) is not None:
            ok, value = False, None
            if not job.future.cancelled():  # a caller gone before the job started: it never starts
                try:
                    value, ok = job.fn(), True
                except BaseException as exc:  # handed to the awaiting task, as a pool does
                    value = exc
            if job.future.cancelled():
                if job.on_abandon is not None:
                    job.on_abandon()
            else:
                self._hand_back(job, ok, value)
            del job, value  # not kept alive while this worker waits for the next job

    def _hand_back(self, job: LaneJob[Any], ok: bool, value: Any) -> None:
        loop = job.loop
        with self._lock:
            ended = self._ended.get(loop)
            wake = ended is None
            if ended is None:
                self._ended[loop] = [(job, ok, value)]
            else:
                ended.append((job, ok, value))
        if wake:
            try:
                loop.call_soon_threadsafe(self._deliver, loop)
            except RuntimeError:  # the loop has closed: nobody awaits these jobs any more
                with self._lock:
                    self._ended.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``: set the results that ended since the last hand-over."""
        with self._lock:
            ended = self._ended.pop(loop, [])
        for job, ok, value in ended:
            future = job.future
            if future.done():  # cancelled after the job ended
                if job.on_abandon is not None:
                    job.on_abandon()
            elif ok:
                future.set_result(value)
            else:
                future.set_exception(value)
