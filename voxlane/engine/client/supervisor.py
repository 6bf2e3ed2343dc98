"""EngineProcess: starts the engine process, watches that it lives, and stops it.

The process entry (``voxlane.engine.proc.run_engine``) is imported only when the process is spawned:
it pulls in the engine core and its runners, which the API process must never load (the spawned child
imports them itself).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time

from voxlane.config import ServerConfig

_WATCH_INTERVAL_S = 0.2


class EngineProcess:
    def __init__(self, config: ServerConfig, input_addr: str, output_addr: str) -> None:
        self.config = config
        self.input_addr = input_addr
        self.output_addr = output_addr
        self._process: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        from voxlane.engine.proc import run_engine

        ctx = multiprocessing.get_context("spawn")
        self._process = ctx.Process(
            target=run_engine,
            args=(self.config.engine, self.input_addr, self.output_addr, self.config.log_level),
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
