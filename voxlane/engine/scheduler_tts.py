"""Ordering speech units: playback deadlines plus admission of new streams.

Contract (same shape as the ASR scheduler; no method blocks or sleeps, time is always an argument):
- ``add(work, now)`` queues a unit; units of one stream arrive in index order.
- ``next_unit(now)`` returns the unit to synthesise next, or None. Only the head unit of a stream is
  eligible, and only while no other unit of that stream is running: a stream's units are useless out
  of order. Units of different streams may run at once: the caller starts up to ``slots`` of them and
  sets ``slots`` to the parallel capacity it has now (fewer while ASR shares the cores).
- ``done(request_id, audio_s, now)`` reports that a stream's running unit produced ``audio_s`` seconds.
- ``abort(request_id)`` forgets a stream; idempotent.

Policy ``deadline``. A stream is *started* once its first unit is delivered (the client's player starts
then); its player runs dry at ``playback_start + audio_s``, and its next unit is due ``SAFETY_S`` before
that. The unit to run next is:

1. the first unit of a new stream (in arrival order) if the new stream is *admissible*: playing the
   queued and running work forward on ``slots`` parallel slots (``admissible``) shows that starting it
   now leaves every started stream, and the new one, its next units in time. Under capacity this holds,
   so a new stream gets its first audio at once, ahead of started streams that have audio to spare;
2. otherwise the head of the started stream with the earliest deadline (units run to their end, so a
   started stream about to run dry is never held up by a new stream's first unit; when all are safe
   this works ahead and builds their buffers);
3. otherwise (only new streams wait) the oldest new stream: the thread never idles.

Past capacity, started streams therefore keep playing and run ahead until they have buffered enough or
finished, and only then does a waiting stream start: the wait moves to new streams' time to first audio
(measured in docs/tts.md). Synthesis time and audio length per phoneme id are learnt from
``next_unit``/``done`` times, so the estimate follows the voice, the speed and the machine's load.

Policy ``fifo``: units run in the order their streams arrived (first come, first served), for comparison.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from voxlane.messages import SpeechUnit

ORDERS = ("deadline", "fifo")
SAFETY_S = 1.0
"""Audio a started stream should still have buffered when its next unit is due (its EDF key)."""
RISK_MARGIN_S = 0.3
"""Audio a stream must still have when its next unit is estimated to finish, for a new stream to start."""
COST_HEADROOM = 1.25
"""Estimated synthesis times are stretched by this much when deciding whether a new stream fits
(``--tts-cost-headroom``; the default is in config.py, and why)."""
INITIAL_S_PER_ID = 0.003
INITIAL_AUDIO_PER_ID_S = 0.028
"""Guesses before the first unit is measured (Piper medium, one onnxruntime thread: ~2.4 ms of
synthesis and ~28 ms of audio per phoneme id, RTF ~0.1)."""
_LEARN = 0.3


@dataclass(eq=False)
class UnitWork:
    msg: SpeechUnit
    enqueued_s: float = 0.0

    @property
    def request_id(self) -> str:
        return self.msg.request_id


@dataclass(eq=False)
class StreamState:
    request_id: str
    arrival_s: float
    seq: int
    units: deque[UnitWork] = field(default_factory=deque)
    running: UnitWork | None = None
    running_since_s: float = 0.0
    playback_start_s: float | None = None
    """When the first unit's audio was delivered (the client's player starts then)."""
    audio_s: float = 0.0
    """Seconds of audio delivered so far."""

    @property
    def started(self) -> bool:
        return self.playback_start_s is not None

    def deadline(self) -> float:
        if self.playback_start_s is None:
            return self.arrival_s
        return self.playback_start_s + self.audio_s - SAFETY_S


class TtsScheduler:
    def __init__(self, order: str = "deadline", cost_headroom: float = COST_HEADROOM) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}")
        self.order = order
        self.cost_headroom = cost_headroom
        """Estimated synthesis times are stretched by this much in ``admissible``."""
        self.slots = 1
        """Units the caller can run at once; ``admissible`` plays the queue forward on this many slots."""
        self._streams: dict[str, StreamState] = {}
        self._seq = 0
        self._queued = 0
        self.s_per_id = INITIAL_S_PER_ID
        """Seconds of synthesis per phoneme id, smoothed over the last units."""
        self.audio_per_id_s = INITIAL_AUDIO_PER_ID_S
        """Seconds of audio per phoneme id (depends on the voice and the speed), smoothed likewise."""

    def __len__(self) -> int:
        """Units waiting (not running)."""
        return self._queued

    def add(self, work: UnitWork, now: float) -> None:
        work.enqueued_s = now
        stream = self._streams.get(work.request_id)
        if stream is None:
            stream = self._streams[work.request_id] = StreamState(work.request_id, now, self._seq)
            self._seq += 1
        stream.units.append(work)
        self._queued += 1

    def abort(self, request_id: str) -> int:
        stream = self._streams.pop(request_id, None)
        if stream is None:
            return 0
        self._queued -= len(stream.units)
        return len(stream.units)

    def cost_s(self, work: UnitWork) -> float:
        """Estimated synthesis time of a unit."""
        return len(work.msg.phoneme_ids) * self.s_per_id

    def has_ready(self) -> bool:
        """Whether ``next_unit`` would return a unit (some stream has a unit waiting and none running)."""
        return any(s.running is None and s.units for s in self._streams.values())

    def next_unit(self, now: float) -> UnitWork | None:
        ready = [s for s in self._streams.values() if s.running is None and s.units]
        if not ready:
            return None
        if self.order == "fifo":
            best = min(ready, key=lambda s: s.seq)
        else:
            best = self._pick(ready, now)
        work = best.units.popleft()
        best.running, best.running_since_s = work, now
        self._queued -= 1
        return work

    def _pick(self, ready: list[StreamState], now: float) -> StreamState:
        new = min((s for s in ready if not s.started), key=lambda s: s.seq, default=None)
        if new is not None and self.admissible(new, now):
            return new
        started = [s for s in ready if s.started]
        if started:
            return min(started, key=lambda s: (s.deadline(), s.seq))  # also works ahead when all are safe
        assert new is not None
        return new  # only new streams wait: never idle

    def admissible(self, new: StreamState, now: float) -> bool:
        """Whether ``new`` can start now without making any started stream (or itself) stall.

        Plays the rest forward with the estimated costs (times ``cost_headroom``) on ``slots`` parallel
        slots, the running units holding theirs until their estimated end: ``new``'s first unit on the
        first free slot, then every queued unit of the started streams and of ``new`` in deadline order,
        each on the first free slot and not before its stream's previous unit ends, as ``next_unit`` would
        run them with no further arrivals. Admissible if each unit would finish ``RISK_MARGIN_S`` before
        its player runs dry. Under capacity that holds, so a new stream starts at once; past it, a new
        stream waits until the started ones have run far enough ahead (or finished), which is what keeps
        them playing. A new stream whose text would stall it even alone (a long unit after a short one) is
        judged on the others only, so it is not held back for what no order can fix."""
        return self._plays_in_time(new, now, check_new=self._plays_in_time(new, now, alone=True))

    def _plays_in_time(self, new: StreamState, now: float, alone: bool = False, check_new: bool = True) -> bool:
        others = [] if alone else [s for s in self._streams.values() if s is not new]
        free: list[float] = []  # when each slot is next free
        plans: list[tuple[float, int, bool, float, deque[UnitWork]]] = []
        for stream in others:
            ready_s = now
            runs_dry_s = None if stream.playback_start_s is None else stream.playback_start_s + stream.audio_s
            if stream.running is not None:
                ready_s = max(now, stream.running_since_s + self.cost_s(stream.running) * self.cost_headroom)
                free.append(ready_s)
                runs_dry_s = (ready_s if runs_dry_s is None else runs_dry_s) + self.audio_estimate_s(stream.running)
            if runs_dry_s is not None and stream.units:
                plans.append((runs_dry_s, stream.seq, True, ready_s, deque(stream.units)))
        free = sorted(free + [now] * max(0, self.slots - len(free)))[-self.slots :]
        heapq.heapify(free)
        first_done_s = heapq.heappop(free) + self.cost_s(new.units[0]) * self.cost_headroom
        heapq.heappush(free, first_done_s)
        if len(new.units) > 1:
            runs_dry_s = first_done_s + self.audio_estimate_s(new.units[0])
            plans.append((runs_dry_s, new.seq, check_new, first_done_s, deque(list(new.units)[1:])))
        heapq.heapify(plans)
        while plans:
            runs_dry_s, seq, checked, ready_s, units = heapq.heappop(plans)
            unit = units.popleft()
            done_s = max(heapq.heappop(free), ready_s) + self.cost_s(unit) * self.cost_headroom
            heapq.heappush(free, done_s)
            if checked and done_s > runs_dry_s - RISK_MARGIN_S:
                return False
            if units:
                heapq.heappush(plans, (runs_dry_s + self.audio_estimate_s(unit), seq, checked, done_s, units))
        return True

    def audio_estimate_s(self, work: UnitWork) -> float:
        return len(work.msg.phoneme_ids) * self.audio_per_id_s

    def done(self, request_id: str, audio_s: float, now: float, last: bool = False, learn_cost: bool = True) -> None:
        """``learn_cost=False``: the unit ran faster than a slot runs (the caller's solo session, all cores),
        so its time would make the estimates for parallel work too low; only its audio length is learnt."""
        stream = self._streams.get(request_id)
        if stream is None:
            return  # aborted while running
        work, stream.running = stream.running, None
        if work is not None and audio_s > 0:
            elapsed = max(0.0, now - stream.running_since_s)
            if work.msg.phoneme_ids:
                ids = len(work.msg.phoneme_ids)
                if learn_cost:
                    self.s_per_id += _LEARN * (elapsed / ids - self.s_per_id)
                self.audio_per_id_s += _LEARN * (audio_s / ids - self.audio_per_id_s)
        if stream.playback_start_s is None:
            stream.playback_start_s = now
        stream.audio_s += audio_s
        if last:
            del self._streams[request_id]

    def deadline_of(self, request_id: str) -> float | None:
        stream = self._streams.get(request_id)
        return None if stream is None else stream.deadline()

    @property
    def stream_count(self) -> int:
        return len(self._streams)
