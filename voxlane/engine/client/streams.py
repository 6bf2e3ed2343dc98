"""ResultStream: one request's results on their way back from the engine, handed out in index order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from voxlane.errors import EngineUnavailable, VoxlaneError

T = TypeVar("T")


class ResultStream(Generic[T]):
    """The ``count`` results of one request (a transcription's windows, a speech stream's units, a voice
    probe's one verdict), which the engine may finish in any order, handed to the one reader in order.

    The client's receive task ``put``s results; anyone may ``fail`` the stream (the client when the engine
    dies or the server stops, a route's feeder that cannot prepare the next item), and the reader raises
    that error. ``finished`` turns true once the reader has had every result: a stream left before that has
    work in the engine worth aborting.
    """

    def __init__(self, request_id: str, count: int, what: str) -> None:
        self.request_id = request_id
        self.count = count
        self.what = what
        """What the engine works on, for the timeout's message ("this audio", "this speech")."""
        self.finished = False
        self._arrived: asyncio.Queue[tuple[int, T] | VoxlaneError] = asyncio.Queue()
        self._pending: dict[int, T] = {}

    def put(self, index: int, result: T) -> None:
        self._arrived.put_nowait((index, result))

    def fail(self, error: VoxlaneError) -> None:
        self._arrived.put_nowait(error)

    async def results(self, timeout_s: float) -> AsyncIterator[T]:
        """The results in index order. Raises EngineUnavailable when they have not all come within
        ``timeout_s`` of the first call (``--request-timeout-s``), or the error the stream was failed with."""
        deadline = time.monotonic() + timeout_s
        next_index = 0
        while next_index < self.count:
            if next_index in self._pending:
                yield self._pending.pop(next_index)
                next_index += 1
                continue
            try:
                item = await asyncio.wait_for(self._arrived.get(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise EngineUnavailable(
                    f"the engine did not finish {self.what} within {timeout_s:g} s (--request-timeout-s); "
                    "the server is overloaded: retry later"
                ) from None
            if isinstance(item, VoxlaneError):
                raise item
            index, result = item
            self._pending[index] = result
        self.finished = True
