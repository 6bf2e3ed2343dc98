"""Engine-internal state. Not sent over the wire (see messages.py) and not HTTP (see protocol.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxlane.messages import TranscribeOptions, WindowRequest


@dataclass(eq=False)
class WindowWork:
    """One window waiting for, or in, a batch."""

    msg: WindowRequest
    features: np.ndarray
    arrival_s: float
    """When the window's request was first seen by the engine."""
    enqueued_s: float
    """When this window entered the queue (batch wait is measured from here)."""
    seq: int = 0
    queued: bool = True
    """False once the window left the queue (taken into a batch, or aborted)."""

    @property
    def request_id(self) -> str:
        return self.msg.request_id

    @property
    def options(self) -> TranscribeOptions:
        return self.msg.options


@dataclass
class RequestState:
    request_id: str
    arrival_s: float
    window_count: int
    emitted: int = 0
