"""A runner that needs no model: for engine tests with a fake clock and no CPU cost.

Each pass of a window yields one segment " window I" (" window I part P" for continuation pass P). A
window listed in ``stop_early`` ends its first ``stop_early[...]`` passes half way through, as a greedy
decode that says end-of-text early does, so the engine must schedule continuations for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from voxlane.messages import Segment, WindowResult
from voxlane.runners.base import WindowOutput, WindowPass


class FakeRunner:
    is_multilingual = False
    n_mels = 80

    def __init__(
        self,
        delay_s: float = 0.0,
        fail_request_ids: frozenset[str] = frozenset(),
        stop_early: dict[tuple[str, int], int] | None = None,
    ) -> None:
        self.delay_s = delay_s
        self.fail_request_ids = fail_request_ids
        self.stop_early = stop_early or {}
        self.batches: list[list[tuple[str, int]]] = []
        """(request id, window index) of each window of each batch, in the order they ran."""
        self.passes: list[tuple[str, int, int, float]] = []
        """(request id, window index, pass, offset_s) of every pass, in the order they ran."""
        self._lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def run(self, batch: Sequence[WindowPass]) -> list[WindowOutput]:
        with self._lock:
            self.batches.append([(w.request_id, w.msg.index) for w in batch])
            self.passes.extend((w.request_id, w.msg.index, w.passes, w.msg.offset_s) for w in batch)
        if self.delay_s:
            time.sleep(self.delay_s)
        outputs = []
        for w in batch:
            if w.request_id in self.fail_request_ids:
                outputs.append(WindowOutput(WindowResult(w.request_id, w.msg.index, "en", [], error="fake failure")))
                continue
            text = f" window {w.msg.index}" + (f" part {w.passes}" if w.passes else "")
            early = w.passes < self.stop_early.get((w.request_id, w.msg.index), 0)
            length_s = w.msg.duration_s / 2 if early else w.msg.duration_s
            seg = Segment(w.msg.offset_s, w.msg.offset_s + length_s, text, [], 0.0, 1.0, 0.0, 0.0)
            outputs.append(
                WindowOutput(WindowResult(w.request_id, w.msg.index, "en", [seg]), resume_s=length_s if early else None)
            )
        return outputs
