"""The runner contract.

A runner gets a batch of windows that the scheduler judged compatible (same task and temperature) and
returns exactly one ``WindowOutput`` per window, in order. A window that fails gets a result with
``error`` set; it never fails its neighbours. The engine checks the count loudly.

A runner may say that its decode of a window stopped before the window's audio did (``resume_s``): the
engine then schedules the rest of the window as a continuation, like any other window, and sends the
window's result only when its last pass is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from voxlane.engine.request import WindowWork
from voxlane.messages import WindowResult


@dataclass
class WindowOutput:
    result: WindowResult
    """The segments this pass decoded, at their true times in the original audio."""
    resume_s: float | None = None
    """Seconds into this pass's window from which the rest must be decoded again (the end of the last
    segment the decode closed); None when the window is done."""


class Runner(Protocol):
    is_multilingual: bool
    n_mels: int

    def run(self, batch: Sequence[WindowWork]) -> list[WindowOutput]:
        ...
