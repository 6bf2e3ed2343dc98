"""Ordering speech units by playback deadline.

Contract (same shape as the ASR scheduler; no method blocks or sleeps, time is always an argument):
- ``add(work, now)`` queues a unit; units of one stream arrive in index order.
- ``next_unit(now)`` returns the unit to synthesise next, or None. Only the head unit of a stream is
  eligible, and only while no other unit of that stream is running: a stream's units are useless out
  of order.
- ``done(request_id, audio_s, now)`` reports that a stream's running unit produced ``audio_s`` seconds.
- ``abort(request_id)`` forgets a stream; idempotent.

Policy ``deadline`` (earliest deadline first, work-conserving): a stream's first unit is due at its
arrival (time to first audio); a later unit is due when the audio already sent would run out, that is
``playback_start + audio_s - SAFETY_S`` where playback starts when the first unit was delivered: a started
stream asks for its next unit while it still has ``SAFETY_S`` of audio left, since a unit takes time to
synthesise. A stream with 10 s buffered is due 9 s from now, so a new stream's first unit (due now) goes
first; a started stream about to run dry goes before a new one, so past capacity streams that already
play keep playing while new streams wait (measured in docs/tts.md).
Policy ``fifo``: units run in the order their streams arrived (first come, first served), for comparison.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from voxlane.messages import SpeechUnit

ORDERS = ("deadline", "fifo")
SAFETY_S = 1.0
"""Audio a started stream should still have buffered when its next unit is due."""


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
    running: bool = False
    playback_start_s: float | None = None
    """When the first unit's audio was delivered (the client's player starts then)."""
    audio_s: float = 0.0
    """Seconds of audio delivered so far."""

    def deadline(self) -> float:
        if self.playback_start_s is None:
            return self.arrival_s
        return self.playback_start_s + self.audio_s - SAFETY_S


class TtsScheduler:
    def __init__(self, order: str = "deadline") -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}")
        self.order = order
        self._streams: dict[str, StreamState] = {}
        self._seq = 0
        self._queued = 0

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

    def _key(self, stream: StreamState) -> tuple[float, int, int]:
        if self.order == "fifo":
            return (stream.seq, stream.units[0].msg.index, 0)
        return (stream.deadline(), stream.seq, stream.units[0].msg.index)

    def next_unit(self, now: float) -> UnitWork | None:
        best: StreamState | None = None
        best_key: tuple[float, int, int] | None = None
        for stream in self._streams.values():
            if stream.running or not stream.units:
                continue
            key = self._key(stream)
            if best_key is None or key < best_key:
                best, best_key = stream, key
        if best is None:
            return None
        best.running = True
        self._queued -= 1
        return best.units.popleft()

    def done(self, request_id: str, audio_s: float, now: float, last: bool = False) -> None:
        stream = self._streams.get(request_id)
        if stream is None:
            return  # aborted while running
        stream.running = False
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
