"""The runner contract.

A runner gets a batch of windows that the scheduler judged compatible (same task and temperature) and
returns exactly one ``WindowResult`` per window, in order. A window that fails gets a result with
``error`` set; it never fails its neighbours. The engine checks the count loudly.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from voxlane.engine.request import WindowWork
from voxlane.messages import WindowResult


class Runner(Protocol):
    is_multilingual: bool
    n_mels: int

    def run(self, batch: Sequence[WindowWork]) -> list[WindowResult]:
        ...
