"""A runner that needs no model: for engine tests with a fake clock and no CPU cost."""

from __future__ import annotations

import threading
import time
from typing import Sequence

from voxlane.engine.request import WindowWork
from voxlane.messages import Segment, WindowResult


class FakeRunner:
    is_multilingual = False
    n_mels = 80

    def __init__(self, delay_s: float = 0.0, fail_request_ids: frozenset[str] = frozenset()) -> None:
        self.delay_s = delay_s
        self.fail_request_ids = fail_request_ids
        self.batches: list[list[tuple[str, int]]] = []
        self._lock = threading.Lock()

    def run(self, batch: Sequence[WindowWork]) -> list[WindowResult]:
        with self._lock:
            self.batches.append([(w.request_id, w.msg.index) for w in batch])
        if self.delay_s:
            time.sleep(self.delay_s)
        results = []
        for w in batch:
            if w.request_id in self.fail_request_ids:
                results.append(WindowResult(w.request_id, w.msg.index, "en", [], error="fake failure"))
                continue
            text = f" window {w.msg.index}"
            seg = Segment(w.msg.offset_s, w.msg.offset_s + w.msg.duration_s, text, [], 0.0, 1.0, 0.0, 0.0)
            results.append(WindowResult(w.request_id, w.msg.index, "en", [seg]))
        return results
