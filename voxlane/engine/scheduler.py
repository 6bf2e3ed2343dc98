"""Batching 30 s windows across requests, fairly.

Contract:
- ``add(work, now)`` queues a window; ``abort(request_id)`` drops every queued window of a request and
  is idempotent; ``next_batch(now)`` returns a batch when one is due, else None; ``next_deadline()`` tells
  the caller when a batch will be due without new input (None: nothing queued). No method blocks or
  sleeps, and time is always an argument, so the policy is tested with a fake clock.
- A batch is due when ``max_batch_size`` windows wait or the oldest has waited ``max_batch_wait_s``.
- Order (fairness): window *i* of a request that arrived at *t* gets the virtual start time
  ``t + i * window_cost_s``, and windows run in that order. ``window_cost_s`` is what one window costs
  the engine (the core keeps it measured). A 2-hour file that arrived first is served at the machine's pace,
  and a 3-second clip arriving later is due at its own arrival time, so it jumps ahead of every window
  of the long file that would only have been reached after that. Two long files share the engine evenly.
- Live work (``WindowRequest.deadline_s``, a realtime session's decode) is ordered by its deadline,
  ``now + deadline_s`` when it is queued, among those virtual start times: it goes ahead of every batch
  window whose fair turn comes later (a long file's later windows), and behind those whose turn came
  before its deadline. Batch work cannot starve: a queued batch window's virtual start time is fixed, and
  the deadlines of live work arriving later only grow past it.
- A batch holds windows of one (Whisper model, task, temperature, partial or not, live or not): those decode
  with the same settings, and live work does not wait for batch windows that share its batch.
- Live work shares a batch only with live work of its key queued at that moment, at most
  ``live_batch_size`` decodes (--live-batch-size): a live decode never waits for a partner. On a CPU that is
  1, one decode to a batch: a batch costs about the sum of its windows, so a final batched with others
  waits for all of them (and for the temperature fallback of one whose greedy decode loops, seconds);
  alone, the engine's workers take the decodes due next side by side. Measured with 8 live streams of long
  speech, same run (docs/benchmarks.md): final latency p50 0.86 s and p95 2.05 s alone, 1.25 s and 3.70 s
  batched. Partials once shared batches, padded to the longest of them (a 15 s tail made seven 2 s tails
  cost 15 s each); one to a batch, finals p50 1.08-1.12 s against 1.14-1.19 s and p95 2.26-2.31 s against
  2.46-2.52 s. On a GPU a batch of 16 costs about what one window costs, so the finals (or partials) of
  different sessions that are due together share one there (docs/asr-engine.md
  "Scheduling").
- Load-adaptive decoding: each batch of batch work leaves with the beam its windows are decoded at
  (``WindowPass.beam_size``, ``decode_beam``): ``beam_size`` while the other requests in the engine (queued,
  or in batches running: the core counts them), one window each at the engine's measured cost per window,
  would take the engine at most ``adaptive_queue_s``,
  else 1 (greedy; the runner's doubt beam then decodes again the windows it doubts). Requests, not windows:
  a file of many windows counts once. A queue of many requests gets greedy decodes, and the beam comes back
  as it drains. Windows decoded with timestamp tokens (long files, responses that show times) are decoded
  greedily at any load: there the beam read no better (docs/decoding.md). Every window of a batch gets the
  same beam, so a window reads the same whatever its neighbours at that beam. A window with a beam is
  encoded on 30 s (``is_short``).
"""

from __future__ import annotations

import heapq
import logging
from collections import deque

from voxlane.engine.request import WindowWork
from voxlane.runners.base import decodes_timestamps, is_short

log = logging.getLogger(__name__)


def batch_key(
    work: WindowWork, short_pad_frames: int = 0, final_pad_frames: int = 0
) -> tuple[str, float, bool, bool, bool, str, bool]:
    """Windows that may share a batch, of one Whisper model only. Live work shares only with live work: on a
    CPU a batch costs about the sum of its windows, so a live final batched with seven windows of a long file
    would wait for all eight. A short window (``is_short``: encoded on its own frames) shares only with short
    windows: beside a 30 s window it would be padded to 30 s. Windows decoded with timestamp tokens share
    only with each other, since load-adaptive decoding gives them no beam (``decode_beam``)."""
    return (
        work.options.task,
        work.options.temperature,
        work.msg.partial,
        work.msg.is_live,
        is_short(work, short_pad_frames, final_pad_frames),
        work.msg.model,
        decodes_timestamps(work),
    )


class AsrScheduler:
    def __init__(
        self,
        max_batch_size: int,
        max_batch_wait_s: float,
        window_cost_s: float = 0.5,
        short_pad_frames: int = 0,
        live_batch_size: int = 1,
        final_pad_frames: int = 0,
        beam_size: int = 1,
        adaptive_queue_s: float = 0.0,
    ) -> None:
        self.max_batch_size = max_batch_size
        self.beam_size = beam_size
        self.adaptive_queue_s = adaptive_queue_s
        """Seconds of queued work past which batches are decoded greedily (0: always at ``beam_size``)."""
        self.live_batch_size = live_batch_size
        self._live_reach = 0.0
        """The longest deadline of the live work queued so far: no queued live work is due later than now plus
        this, which bounds the search for live work that may share a live batch."""
        self.short_pad_frames = short_pad_frames
        self.final_pad_frames = final_pad_frames
        self.max_batch_wait_s = max_batch_wait_s
        self.window_cost_s = window_cost_s
        self._heap: list[tuple[float, int, WindowWork]] = []
        self._by_arrival: deque[WindowWork] = deque()
        self._by_request: dict[str, list[WindowWork]] = {}
        self._live = 0
        self._seq = 0

    def __len__(self) -> int:
        return self._live

    def add(self, work: WindowWork, now: float) -> None:
        work.enqueued_s = now
        work.seq = self._seq
        self._seq += 1
        heapq.heappush(self._heap, (self.priority(work, now), work.seq, work))
        self._by_arrival.append(work)
        self._by_request.setdefault(work.request_id, []).append(work)
        self._live += 1
        if work.msg.deadline_s is not None:  # is_live, spelled out so that mypy knows the deadline is a float
            self._live_reach = max(self._live_reach, work.msg.deadline_s)

    def priority(self, work: WindowWork, now: float) -> float:
        """When the window should start, on the engine's clock: its deadline for live work, else its fair
        virtual start time."""
        if work.msg.deadline_s is not None:
            return now + work.msg.deadline_s
        return work.arrival_s + work.msg.index * self.window_cost_s

    def abort(self, request_id: str) -> int:
        """Drop the request's queued windows. Returns how many were dropped (0 when none: idempotent)."""
        windows = self._by_request.pop(request_id, [])
        dropped = 0
        for w in windows:
            if w.queued:
                w.queued = False
                dropped += 1
        self._live -= dropped
        return dropped

    def _oldest(self) -> WindowWork | None:
        while self._by_arrival and not self._by_arrival[0].queued:
            self._by_arrival.popleft()
        return self._by_arrival[0] if self._by_arrival else None

    def next_deadline(self) -> float | None:
        oldest = self._oldest()
        return None if oldest is None else oldest.enqueued_s + self.max_batch_wait_s

    def models(self) -> set[str]:
        """The models of the queued windows (a linear scan, as ``has_live``)."""
        return {w.msg.model for _, _, w in self._heap if w.queued}

    @property
    def has_live(self) -> bool:
        """Whether live work is queued (a linear scan: the queue holds what the admission bounds allow)."""
        return any(w.queued and w.msg.is_live for _, _, w in self._heap)

    def _live_share(self, key: tuple[str, float, bool, bool, bool, str, bool], free_workers: int) -> int:
        """How many live decodes of ``key`` a batch takes: --live-batch-size, or fewer where the queued ones
        split over the free workers take less (a linear scan, as ``has_live``, on a GPU only)."""
        if self.live_batch_size <= 1 or free_workers <= 1:
            return self.live_batch_size
        same = sum(
            1
            for _, _, w in self._heap
            if w.queued and w.msg.is_live and batch_key(w, self.short_pad_frames, self.final_pad_frames) == key
        )
        return max(1, min(self.live_batch_size, -(-(same + 1) // free_workers)))

    def decode_beam(self, waiting: int, timestamps: bool = False) -> int:
        """The beam of a batch of batch work that leaves ``waiting`` requests with windows in the queue.
        Windows decoded with timestamp tokens (``timestamps``) get none: there the beam read no better than
        greedy decoding with the doubt beam, on the wide dev set's core and on its long files
        (docs/decoding.md), at half the speed."""
        if self.beam_size <= 1 or self.adaptive_queue_s <= 0:
            return self.beam_size
        if timestamps:
            return 1
        return self.beam_size if waiting * self.window_cost_s <= self.adaptive_queue_s else 1

    def next_batch(
        self, now: float, live_only: bool = False, free_workers: int = 1, active_requests: int = 0
    ) -> list[WindowWork] | None:
        """The next batch when one is due. ``live_only``: only live work may start now (the core keeps a
        worker for it); batch windows keep their places. ``free_workers``: the engine's workers free now,
        over which the live work queued is split evenly (one worker's batch of 16 while three idle would
        serve them no sooner than 16 decodes spread over four). ``active_requests``: requests in the engine,
        queued or running (the core's count), for the load-adaptive beam: the batches running hold windows
        this queue no longer sees."""
        oldest = self._oldest()
        if oldest is None:
            return None
        if self._live < self.max_batch_size and now < oldest.enqueued_s + self.max_batch_wait_s:
            return None
        batch: list[WindowWork] = []
        skipped: list[tuple[float, int, WindowWork]] = []
        key = None
        size = self.max_batch_size
        while self._heap and len(batch) < size:
            entry = heapq.heappop(self._heap)
            work = entry[2]
            if not work.queued:
                continue
            if live_only and not work.msg.is_live:
                skipped.append(entry)
                continue
            if key is None:
                key = batch_key(work, self.short_pad_frames, self.final_pad_frames)
                if key[3]:  # live work: only what is queued now joins it, its share of the free workers
                    size = min(size, self._live_share(key, free_workers))
            elif batch_key(work, self.short_pad_frames, self.final_pad_frames) != key:
                skipped.append(entry)
                if work.msg.is_live and not key[3]:
                    break  # live work due next: no later batch window jumps ahead of it into this batch
                if key[3] and entry[0] > now + self._live_reach:
                    break  # no live work is queued past this point
                continue
            batch.append(work)
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        if not batch:
            return None
        if key is not None and key[3] and not key[2] and log.isEnabledFor(logging.DEBUG):
            # How often finals of different sessions are due together (docs/asr-engine.md "Scheduling").
            queued = sum(1 for _, _, w in self._heap if w.queued and w.msg.is_live and not w.msg.partial)
            if len(batch) == 1:
                log.debug("a live final starts with %d more live finals queued", queued)
            else:
                log.debug("%d live finals start in one batch with %d more live finals queued", len(batch), queued)
        for work in batch:
            work.queued = False
            siblings = self._by_request.get(work.request_id)
            if siblings is not None:
                siblings.remove(work)
                if not siblings:
                    del self._by_request[work.request_id]
        self._live -= len(batch)
        if key is not None and not key[3]:
            beam = self.decode_beam(max(len(self._by_request), active_requests - 1), key[6])
            for work in batch:
                work.beam_size = beam
        return batch
