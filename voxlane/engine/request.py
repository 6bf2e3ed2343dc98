"""Engine-internal state: a window in the scheduler's queue, a request's progress. Not sent over the wire
(see messages.py) and not HTTP (see protocol.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from voxlane.runners.base import WindowPass


@dataclass(eq=False, kw_only=True)
class WindowWork(WindowPass):
    """One window waiting for, or in, a batch: the runner's ``WindowPass`` and the scheduler's bookkeeping.
    Its ``continuation`` is a ``WindowWork`` that keeps ``arrival_s`` (its request's place in the fair
    order) and starts queued afresh."""

    arrival_s: float
    """When the window's request was first seen by the engine."""
    enqueued_s: float
    """When this window entered the queue (batch wait is measured from here)."""
    seq: int = field(default=0, init=False)
    """Set by the scheduler when it queues the window."""
    queued: bool = field(default=True, init=False)
    """False once the window left the queue (taken into a batch, or aborted)."""


@dataclass
class RequestState:
    request_id: str
    arrival_s: float
    window_count: int
    emitted: int = 0
