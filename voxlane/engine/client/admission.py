"""Admission control: the API process's bounded queues, and how long a refused client should wait.

Queues (each limit a ``voxlane serve`` setting):

- transcription requests at once, from their upload to their answer (``--max-transcription-requests``);
- audio with sound in it, admitted and not yet transcribed (``--max-queued-audio-s``), and its 30 s windows
  (``--max-queued-windows``): a window leaves the queue when its result comes back from the engine;
- speech streams at once (``--max-speech-streams``) and their characters not yet spoken
  (``--max-queued-speech-chars``): a unit's characters leave when its audio comes back.

Past a limit the request gets :class:`QueueFull` (429) with ``Retry-After``: the time the engine needs, at
its measured drain rate (:class:`DrainRate`), to make room for the request, clamped to 1..60 s. An empty
queue takes any one request, however large: a request over a limit on its own must not wait forever.

Time is an argument (``now``, in seconds of a monotonic clock), so the rules are tested with a fake clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from voxlane.config import ServerConfig
from voxlane.errors import QueueFull

RETRY_AFTER_MIN_S = 1.0
RETRY_AFTER_MAX_S = 60.0
"""The openai client honours a Retry-After of up to 60 s, and retries sooner past it."""
DRAIN_TAU_S = 20.0
"""Time constant of the drain rates' moving average, in seconds of busy time."""


class DrainRate:
    """How many units (audio seconds, windows, characters) the engine finishes per second while it has work:
    an exponentially weighted moving average over busy time (time constant DRAIN_TAU_S). Idle time is left
    out, so a quiet hour does not make the next burst look slow. Starts at a prior, replaced within a few
    tens of seconds of load."""

    def __init__(self, prior_per_s: float, tau_s: float = DRAIN_TAU_S) -> None:
        self.per_s = prior_per_s
        self.tau_s = tau_s
        self._since: float | None = None
        """When the last completion was counted (or the queue last turned busy); None while idle."""

    def busy(self, now: float) -> None:
        if self._since is None:
            self._since = now

    def idle(self) -> None:
        self._since = None

    def done(self, amount: float, now: float) -> None:
        since = now if self._since is None else self._since
        dt = max(0.0, now - since)
        self._since = now
        if dt > 0:
            weight = 1.0 - math.exp(-dt / self.tau_s)
            self.per_s = (1.0 - weight) * self.per_s + weight * amount / dt
        else:  # the limit of the above for dt -> 0: several results at once (one batch)
            self.per_s += amount / self.tau_s

    def seconds_for(self, amount: float) -> float:
        return amount / max(self.per_s, 1e-6)


@dataclass
class Queue:
    """One bounded quantity: what is admitted and not yet done, its limit and its drain rate."""

    what: str
    """What it counts, for the 429's message ("seconds of audio")."""
    flag: str
    limit: float
    rate: DrainRate
    queued: float = 0.0

    def fits(self, need: float) -> bool:
        return self.queued <= 0 or self.queued + need <= self.limit

    def wait_s(self, need: float) -> float:
        """Seconds until the queue, draining at its rate, has room for ``need``."""
        excess = self.queued + need - self.limit if need <= self.limit else self.queued
        return _clamp(self.rate.seconds_for(max(excess, 0.0)))

    def add(self, amount: float, now: float) -> None:
        if amount > 0:
            self.queued += amount
            self.rate.busy(now)

    def done(self, amount: float, now: float) -> None:
        if amount > 0:
            self.rate.done(amount, now)
            self.remove(amount)

    def remove(self, amount: float) -> None:
        """Take ``amount`` out without counting it as drained (a request aborted or failed)."""
        self.queued = max(0.0, self.queued - amount)
        if self.queued < 1e-9:
            self.queued = 0.0
            self.rate.idle()


def _clamp(seconds: float) -> float:
    return min(max(seconds, RETRY_AFTER_MIN_S), RETRY_AFTER_MAX_S)


def _fmt(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


@dataclass
class _Held:
    """What one admitted request holds in its queues, by the index of its windows or units."""

    queues: tuple[Queue, ...]
    amounts: list[tuple[float, ...]]
    """Per index, the amount held in each of ``queues``."""
    done: set[int] = field(default_factory=set)


class Admission:
    """The queues and their rules. Used on the event loop only: no locks."""

    def __init__(
        self,
        *,
        max_transcriptions: int,
        max_audio_s: float,
        max_windows: int,
        max_speech_streams: int,
        max_speech_chars: int,
    ) -> None:
        self.max_transcriptions = max_transcriptions
        self.transcriptions = 0
        """Transcription requests at once (from upload to answer)."""
        self.audio = Queue("seconds of audio", "--max-queued-audio-s", max_audio_s, DrainRate(10.0))
        self.windows = Queue("30 s windows", "--max-queued-windows", max_windows, DrainRate(1.0))
        self.max_speech_streams = max_speech_streams
        self.speech_streams = 0
        self.chars = Queue("characters of text", "--max-queued-speech-chars", max_speech_chars, DrainRate(100.0))
        self._held: dict[str, _Held] = {}

    @classmethod
    def from_config(cls, config: ServerConfig) -> Admission:
        return cls(
            max_transcriptions=config.max_transcription_requests,
            max_audio_s=config.max_queued_audio_s,
            max_windows=config.max_queued_windows,
            max_speech_streams=config.max_speech_streams,
            max_speech_chars=config.max_queued_speech_chars,
        )

    # --- transcriptions --------------------------------------------------------------------------

    def start_transcription(self) -> None:
        """A transcription request arrives (before its upload is decoded). Raises QueueFull when the server
        has ``--max-transcription-requests`` at once, or when its queues are already full."""
        if self.transcriptions >= self.max_transcriptions:
            # Requests finish about as often as the audio queue drains one request's share of it.
            share = self.audio.queued / max(self.transcriptions, 1)
            raise QueueFull(
                f"the server is handling {self.transcriptions} transcription requests, its limit "
                f"(--max-transcription-requests {self.max_transcriptions}): retry later",
                retry_after_s=_clamp(self.audio.rate.seconds_for(share)),
            )
        for queue in (self.audio, self.windows):
            if queue.limit <= queue.queued:
                raise self._full(queue, 0.0)
        self.transcriptions += 1

    def end_transcription(self) -> None:
        self.transcriptions -= 1

    def audio_room_s(self) -> float:
        """Seconds of audio with sound the audio queue takes now (infinite while it is empty)."""
        return math.inf if self.audio.queued <= 0 else max(0.0, self.audio.limit - self.audio.queued)

    def audio_full(self, need_s: float) -> QueueFull:
        """The 429 for a transcription of ``need_s`` seconds of audio that the audio queue cannot take."""
        return self._full(self.audio, need_s)

    def check_windows(self, durations_s: Sequence[float]) -> None:
        """Whether a transcription of windows of these durations would be admitted now; QueueFull if not."""
        for queue, need in ((self.windows, float(len(durations_s))), (self.audio, sum(durations_s))):
            if not queue.fits(need):
                raise self._full(queue, need)

    def admit_windows(self, request_id: str, durations_s: Sequence[float], now: float) -> None:
        """Hold queue room for a transcription's windows (their durations, in order). Raises QueueFull."""
        self.check_windows(durations_s)
        self._hold(request_id, (self.audio, self.windows), [(d, 1.0) for d in durations_s], now)

    # --- speech ----------------------------------------------------------------------------------

    def check_speech(self, chars: int) -> None:
        """Whether a speech request of ``chars`` characters would be admitted now; raises QueueFull if not.
        For the route to answer before it prepares the text; :meth:`admit_speech` decides."""
        if self.speech_streams >= self.max_speech_streams:
            share = self.chars.queued / max(self.speech_streams, 1)
            raise QueueFull(
                f"{self.speech_streams} speech streams are running, the server's limit (--max-speech-streams "
                f"{self.max_speech_streams}): retry later",
                retry_after_s=_clamp(self.chars.rate.seconds_for(share)),
            )
        if not self.chars.fits(chars):
            raise self._full(self.chars, chars)

    def admit_speech(self, request_id: str, unit_chars: Sequence[int], now: float) -> None:
        """Hold room for a speech stream's units (their characters, in order). Raises QueueFull."""
        self.check_speech(sum(unit_chars))
        self.speech_streams += 1
        self._hold(request_id, (self.chars,), [(float(c),) for c in unit_chars], now)

    def end_speech(self, request_id: str) -> None:
        self.speech_streams -= 1
        self.release(request_id)

    # --- both ------------------------------------------------------------------------------------

    def done(self, request_id: str, index: int, now: float) -> None:
        """The engine has finished item ``index`` (a window, a unit) of ``request_id``: its room is free,
        and it counts towards the drain rate."""
        held = self._held.get(request_id)
        if held is None or index in held.done or not 0 <= index < len(held.amounts):
            return
        held.done.add(index)
        for queue, amount in zip(held.queues, held.amounts[index]):
            queue.done(amount, now)

    def release(self, request_id: str) -> None:
        """The request is over (finished, failed, cancelled): free what it still holds."""
        held = self._held.pop(request_id, None)
        if held is None:
            return
        for index, amounts in enumerate(held.amounts):
            if index not in held.done:
                for queue, amount in zip(held.queues, amounts):
                    queue.remove(amount)

    def _hold(self, request_id: str, queues: tuple[Queue, ...], amounts: list[tuple[float, ...]], now: float) -> None:
        for i, queue in enumerate(queues):
            queue.add(sum(a[i] for a in amounts), now)
        self._held[request_id] = _Held(queues, amounts)

    def _full(self, queue: Queue, need: float) -> QueueFull:
        this = f", this request needs {_fmt(need)}" if need > 0 else ""
        return QueueFull(
            f"the server's queue is full: {_fmt(queue.queued)} {queue.what} are waiting, its limit is "
            f"{_fmt(queue.limit)} ({queue.flag}){this}; retry after the Retry-After header's seconds",
            retry_after_s=queue.wait_s(need),
        )
