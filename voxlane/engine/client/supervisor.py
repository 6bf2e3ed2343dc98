"""EngineProcess: starts the engine process, watches that it lives, and stops it; RestartPolicy: when a dead
engine is started again, and when the server stops trying.

The process entry (``voxlane.engine.entry.run``) imports nothing heavy: the spawned child asks for
PR_SET_PDEATHSIG first, then imports the engine core and its runners, which the API process never loads.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections import deque
from dataclasses import dataclass, field

from voxlane.config import ServerConfig

_WATCH_INTERVAL_S = 0.2


class EngineProcess:
    def __init__(self, config: ServerConfig, input_addr: str, output_addr: str) -> None:
        self.config = config
        self.input_addr = input_addr
        self.output_addr = output_addr
        self._process: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        """Spawn the engine. Call it on the event loop's thread: the child's PR_SET_PDEATHSIG fires when the
        thread that started it ends, so a worker thread's child would die with that thread."""
        from voxlane.engine import entry

        ctx = multiprocessing.get_context("spawn")
        self._process = ctx.Process(
            target=entry.run,
            args=(os.getpid(), self.config.engine, self.input_addr, self.output_addr, self.config.log_level),
            name="voxlane-engine",
            daemon=True,
        )
        self._process.start()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def exitcode(self) -> int | None:
        return None if self._process is None else self._process.exitcode

    async def wait_exit(self) -> int | None:
        """Return the exit code once the process is gone (polled: a child process has no awaitable end)."""
        while self.alive:
            await asyncio.sleep(_WATCH_INTERVAL_S)
        return self.exitcode

    async def stop(self, grace_s: float = 1.0) -> None:
        """Wait up to ``grace_s`` for the process to exit (the caller has asked it to), then kill it."""
        if self._process is None:
            return
        deadline = time.monotonic() + grace_s
        while self._process.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if self._process.is_alive():
            self._process.kill()
        self._process.join(0.5)


@dataclass
class RestartPolicy:
    """When to start a dead engine again. Pure: time is an argument, and it holds no sleeps.

    The n-th death within the last ``window_s`` seconds waits ``backoff_s * 2 ** (n - 1)`` seconds (at most
    ``backoff_max_s``) before the next start; the ``crash_loop_deaths``-th gives up, since an engine that
    dies that often (a model that no longer loads, memory that keeps running out) will not heal by itself.
    A failed start counts as a death.
    """

    backoff_s: float
    backoff_max_s: float
    crash_loop_deaths: int
    window_s: float
    _deaths: deque[float] = field(default_factory=deque)

    @classmethod
    def from_config(cls, config: ServerConfig) -> RestartPolicy:
        return cls(
            config.engine_restart_backoff_s,
            config.engine_restart_backoff_max_s,
            config.engine_crash_loop_deaths,
            config.engine_crash_loop_window_s,
        )

    def on_death(self, now: float) -> float | None:
        """Record a death at ``now``: the seconds to wait before the next start, or None to give up."""
        self._deaths.append(now)
        while self._deaths[0] <= now - self.window_s:
            self._deaths.popleft()
        deaths = len(self._deaths)
        if deaths >= self.crash_loop_deaths:
            return None
        return min(self.backoff_s * 2 ** (deaths - 1), self.backoff_max_s)

    @property
    def recent_deaths(self) -> int:
        """Deaths in the window as of the last one recorded."""
        return len(self._deaths)
