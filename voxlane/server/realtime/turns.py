"""A live transcription session's turn state: its audio, its turns and their pieces, and the events a client is
told about them. Pure and synchronous: time comes in as ``now``, decodes are started through the ``Decodes``
the owner gives (server/realtime/session.py, which sends the events returned here and awaits the decodes).

A turn's audio is kept as *pieces* of at most ``PIECE_S``: when an open turn grows past that, it is cut at its
quietest 100 ms of the last ``CUT_SEARCH_S`` and the piece's final decode starts at once. The rest, the
*tail*, is what partials re-decode. With server_vad the last piece's decode starts at the turn's *pause*; if
the silence that ends the turn is that pause's, the decode is the turn's last piece, and if speech resumes
first it is dropped.
"""

from __future__ import annotations

import math
from asyncio import CancelledError
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from voxlane.audio.live import SAMPLE_RATE, unsent
from voxlane.errors import InvalidRequest, QueueFull, VoxlaneError
from voxlane.server.realtime.events import (
    Shape,
    cleared_event,
    committed_events,
    completed_event,
    delta_event,
    item_done_event,
    new_id,
    speech_started_event,
    speech_stopped_event,
)
from voxlane.text.repeats import cut_repeats

PIECE_S = 28.0
"""An open turn longer than this is cut: a piece is at most one Whisper window (30 s)."""
CUT_SEARCH_S = 8.0
"""Where a long turn is cut: the quietest 100 ms of its last seconds (as long uploads are cut)."""
MIN_TURN_S = 0.1
"""A commit of less audio than this is refused (OpenAI: at least 100 ms)."""
MIN_PARTIAL_S = 0.5
"""A tail with less speech than this (server_vad: counted from where speech started, not from the padding
and look-back before it) is not worth a partial decode."""
LOOKBACK_S = 1.0
"""Audio before server_vad's start (and its prefix padding) that a turn's partials also read, back to the
end of the previous turn at most: Silero scores a word's onset late, and a turn cut at the onset loses its
first word ("the recording" read as "reporting")."""
GAP_LOOKBACK_S = 10.0
"""How far back a turn's final decode reads: to the end of the previous turn (so no audio between turns
goes unread), at most this far before server_vad's start. Silero scores some speech far under any
threshold (high-pitched, whispered: 0.0-0.3), which server_vad then leaves out of every turn; the final,
a 30 s window either way, reads it with the next turn at no more encoder cost."""
CONTEXT_S = 20.0
"""The default of ``--realtime-context-s``. A final decode's window also holds the audio of the session's previous
pieces (turns, or a long turn's earlier parts) that end where it starts, at most this far back, with their text
forced as the start of the transcript (``TranscribeOptions.prefix``). Whisper tiny reads a turn of a few words worse
than the same words inside 30 s of speech; with the context, the long set's turns read 5.8% WER offline against 7.4%
alone (docs/benchmarks.md). The encoder's cost is the same (30 s either way); the decoder pays ~4 ms a forced token."""
CONTEXT_WINDOW_S = 29.0
"""The context and the piece together fit in one 30 s window."""
BURST_S = 10.0
"""Audio a session may send at once before --realtime-max-speed applies (a client may send a clip whole)."""

Event = dict[str, Any]


class Running(Protocol):
    """Work the state may call off (an asyncio task in the session)."""

    def done(self) -> bool: ...

    def cancel(self) -> bool: ...


class Decode(Running, Protocol):
    """A piece's final decode: its text once done."""

    def result(self) -> str: ...


D = TypeVar("D", bound=Decode)


@dataclass(eq=False)
class Piece(Generic[D]):
    start: int
    end: int
    text: D


@dataclass(eq=False)
class Turn(Generic[D]):
    item_id: str
    start: int
    """First sample of the turn's audio (session samples at 16 kHz)."""
    previous_item_id: str | None
    tail: int = 0
    """First sample not yet in a piece."""
    speech_from: int = 0
    """Where server_vad heard the speech begin (after the turn's padding and look-back); the turn's start
    without turn detection."""
    partial_from: int = 0
    """Where partials start reading (LOOKBACK_S before the speech, not GAP_LOOKBACK_S: a partial's cost
    grows with its audio); the turn's start without turn detection."""
    pieces: list[Piece[D]] = field(default_factory=list)
    pause: tuple[int, Piece[D]] | None = None
    """The decode started at the last pause: (where its quiet began, the piece from ``tail`` to the pause)."""
    sent: list[str] = field(default_factory=list)
    """Words sent as deltas so far."""
    committed_at: float | None = None

    def __post_init__(self) -> None:
        self.tail = self.speech_from = self.partial_from = self.start

    @property
    def end(self) -> int:
        """Where the audio of the turn's pieces ends."""
        return self.pieces[-1].end if self.pieces else self.start

    def delta(self, words: list[str], end: int) -> Event:
        """The delta event for ``words`` (past those sent), read from audio that ends at ``end``."""
        text = (" " if self.sent else "") + " ".join(words)
        self.sent += words
        return delta_event(self.item_id, text, ms(end))


class Decodes(Protocol[D]):
    """What the turn state asks of its owner, which runs the decodes."""

    def start_final(self, start: int, end: int) -> D:
        """Start the final decode of session samples [start, end); its context is chosen now (``context``)."""
        ...

    def start_at_pause(self, turn: Turn[D], start: int, end: int) -> D:
        """Start the final decode of [start, end) at a pause of ``turn``."""
        ...

    def count_pause_decode(self, outcome: str) -> None:
        """A pause's decode became the turn's last piece ('final') or was dropped ('speech_went_on')."""
        ...


@dataclass(frozen=True)
class PartialRead(Generic[D]):
    """A partial decode to start: the open turn's audio [start, end), its tail as it was then."""

    turn: Turn[D]
    tail: int
    start: int
    end: int


@dataclass(frozen=True)
class Committed(Generic[D]):
    turn: Turn[D]
    events: list[Event]
    """To send in order; then the turn's completion follows its pieces' decodes."""


class TurnState(Generic[D]):
    """One session's audio and turns, in session samples at 16 kHz."""

    def __init__(self, decodes: Decodes[D], context_s: float = CONTEXT_S) -> None:
        self._decodes = decodes
        self.context_s = min(context_s, CONTEXT_WINDOW_S)
        """Seconds of earlier pieces a final decode reads first (``CONTEXT_S``)."""
        self._pcm = np.zeros(0, dtype=np.int16)
        """The kept audio, from ``pcm_start``, with room after it: each chunk is written in place, and a slice
        taken is never written again (appends land past it; growing or letting go makes a new array)."""
        self._kept = 0
        """Samples of ``_pcm`` that hold audio."""
        self.pcm_start = 0
        """Session sample of the first kept sample (older audio is let go)."""
        self.received = 0
        """Session samples received."""
        self.turn: Turn[D] | None = None
        self._spoken: deque[Piece[D]] = deque(maxlen=32)
        """The session's closed pieces, in order: the context a final decode may read before its audio."""
        self.last_item_id: str | None = None
        self.last_turn_end = 0
        self.partial: Running | None = None
        """The partial decode out now, if any."""
        self.partial_upto = 0
        self.first_audio_at: float | None = None
        self.last_partial_at = 0.0

    # --- audio in ----------------------------------------------------------------------------------

    def check_rate(self, seconds: float, now: float, max_speed: float) -> None:
        """QueueFull if a chunk of ``seconds`` would take the session past ``max_speed`` times real time."""
        if self.first_audio_at is None:
            self.first_audio_at = now
        allowed_s = BURST_S + max_speed * (now - self.first_audio_at)
        if self.received / SAMPLE_RATE + seconds > allowed_s:
            raise QueueFull(
                f"audio is arriving faster than {max_speed:g}x real time "
                "(--realtime-max-speed); this chunk was dropped: send audio as it is recorded",
                retry_after_s=seconds,
                code="rate_limit_exceeded",
            )

    def held_s(self) -> float:
        """Seconds of audio in the open turn."""
        return 0.0 if self.turn is None else (self.received - self.turn.start) / SAMPLE_RATE

    def check_room(self, seconds: float, max_buffer_s: float) -> None:
        """InvalidRequest if a chunk of ``seconds`` would overfill the buffer a manual commit empties."""
        held_s = self.held_s()
        if held_s + seconds > max_buffer_s:
            raise InvalidRequest(
                f"the input audio buffer holds {held_s:.1f} s, the most this server keeps uncommitted is "
                f"{max_buffer_s:g} s (--realtime-max-buffer-s); this chunk was dropped: "
                "send input_audio_buffer.commit first",
                param="audio",
                code="input_audio_buffer_full",
            )

    def take(self, pcm: np.ndarray, manual: bool) -> None:
        """Keep a chunk (16 kHz int16); without turn detection (``manual``) audio opens a turn."""
        start = self.received
        end = self._kept + len(pcm)
        if end > len(self._pcm):  # double the room: each sample is copied a bounded number of times
            grown = np.empty(max(end, 2 * len(self._pcm), SAMPLE_RATE), dtype=np.int16)
            grown[: self._kept] = self._pcm[: self._kept]
            self._pcm = grown
        self._pcm[self._kept : end] = pcm
        self._kept = end
        self.received += len(pcm)
        if manual and self.turn is None and len(pcm):
            self._open(start)

    def audio(self, start: int, end: int) -> np.ndarray:
        """Session samples [start, end) (they must still be kept): a read-only view, since no write ever lands
        in it, so a decode's audio costs the event loop no copy."""
        view = self._pcm[start - self.pcm_start : end - self.pcm_start]
        view.flags.writeable = False
        return view

    def let_go(self, pad_ms: int) -> None:
        """Drop audio no turn can need: more than ``context_s`` before the open turn's tail, or before the
        VAD's prefix padding (``pad_ms``) and ``GAP_LOOKBACK_S``."""
        if self.turn is not None:
            keep_from = self.turn.tail
        else:
            keep_from = self.received - (pad_ms + 100) * SAMPLE_RATE // 1000 - int(GAP_LOOKBACK_S * SAMPLE_RATE)
        keep_from -= int(self.context_s * SAMPLE_RATE)
        if keep_from - self.pcm_start < SAMPLE_RATE:  # let go a second or more at a time
            return
        drop = min(keep_from - self.pcm_start, self._kept)
        # A view, not a copy: the let-go audio's memory goes when ``take`` next grows the array.
        self._pcm = self._pcm[drop:]
        self._kept -= drop
        self.pcm_start += drop

    # --- turn detection ----------------------------------------------------------------------------

    def speech_started(self, sample: int, pad_ms: int) -> Event:
        """server_vad's start at ``sample`` (its prefix padding ``pad_ms`` before the speech)."""
        earliest = max(self.last_turn_end, self.pcm_start)
        turn = self._open(max(sample - int(GAP_LOOKBACK_S * SAMPLE_RATE), earliest))
        turn.speech_from = sample + pad_ms * SAMPLE_RATE // 1000
        turn.partial_from = max(sample - int(LOOKBACK_S * SAMPLE_RATE), earliest)
        return speech_started_event(turn.item_id, ms(max(sample, turn.start)))

    def pause(self, sample: int, quiet_from: int, behind: bool) -> None:
        """Start the open turn's final decode at a pause, unless the previous turn's text is not out yet
        (``behind``: the engine is behind, and this turn waits for it). Partials wait for it or for speech to
        resume."""
        turn = self.turn
        if turn is None:
            return
        end = min(sample, self.received)
        if end - turn.tail < int(MIN_TURN_S * SAMPLE_RATE) or behind:
            return
        self._drop_pause(turn)
        decode = self._decodes.start_at_pause(turn, turn.tail, end)
        turn.pause = (quiet_from, Piece(turn.tail, end, decode))

    def resume(self) -> None:
        """Speech went on after a pause: that pause's decode is not the turn's last piece."""
        if self.turn is not None:
            self._drop_pause(self.turn)

    def speech_stopped(self, sample: int) -> Event | None:
        """server_vad's stop: the event, if a turn is open (the caller then commits it)."""
        if self.turn is None:
            return None
        return speech_stopped_event(self.turn.item_id, ms(sample))

    # --- commits and cuts --------------------------------------------------------------------------

    def commit(
        self, now: float, shape: Shape, end: int | None = None, quiet_from: int | None = None
    ) -> Committed[D] | None:
        """Close the open turn at ``end`` (all audio received by default); ``quiet_from``: where the silence
        that ended it began, if turn detection ended it."""
        turn = self.turn
        if turn is None:
            return None
        end = self.received if end is None else end
        self.turn = None
        self.last_turn_end = end
        self.cancel_partial()
        if not self._pause_ends(turn, end, quiet_from):
            self._drop_pause(turn)
        if end > turn.tail:
            self._close_piece(turn, end)
        turn.committed_at = now
        self.last_item_id = turn.item_id
        return Committed(turn, committed_events(shape, turn.item_id, turn.previous_item_id))

    def cut_region(self) -> tuple[int, np.ndarray] | None:
        """Where to cut the open turn, once its tail is longer than ``PIECE_S``: (first sample, audio) of the
        search region; the caller finds the quietest point in it and calls ``cut``."""
        turn = self.turn
        if turn is None or (self.received - turn.tail) / SAMPLE_RATE <= PIECE_S:
            return None
        search_from = self.received - int(CUT_SEARCH_S * SAMPLE_RATE)
        return search_from, self.audio(search_from, self.received)

    def cut(self, at: int) -> None:
        """Close the open turn's tail at ``at`` as a piece; its final decode starts now."""
        turn = self.turn
        assert turn is not None
        self.cancel_partial()
        self._drop_pause(turn)
        self._close_piece(turn, at)

    def clear(self, pad_ms: int) -> Event:
        """Drop the open turn and its decodes."""
        if self.turn is not None:
            self._drop_pause(self.turn)
            for piece in self.turn.pieces:
                piece.text.cancel()
            self.turn = None
            self.cancel_partial()
        self.let_go(pad_ms)
        return cleared_event()

    # --- partials and finals -----------------------------------------------------------------------

    def partial_due(self, now: float, interval_s: float) -> PartialRead[D] | None:
        """The partial decode to start now, if one is due: none while one is out or a pause's decode is, none
        with less than ``MIN_PARTIAL_S`` of speech or nothing new, at most one each ``interval_s``."""
        turn = self.turn
        if turn is None or turn.pause is not None or (self.partial is not None and not self.partial.done()):
            return None
        speech_s = (self.received - max(turn.tail, turn.speech_from)) / SAMPLE_RATE
        if speech_s < MIN_PARTIAL_S or self.received <= self.partial_upto:
            return None
        if now - self.last_partial_at < interval_s:
            return None
        self.last_partial_at = now
        self.partial_upto = self.received
        return PartialRead(turn, turn.tail, max(turn.tail, turn.partial_from), self.received)

    def partial_words(self, read: PartialRead[D], text: str) -> list[str] | None:
        """The words of a partial's ``text`` to send (the last held back: it may be cut off mid-word); None if
        the turn moved on while it decoded."""
        closed = self.closed_words(read.turn, read.tail)
        if closed is None:
            return None
        return unsent(closed + cut_repeats(text.split()), read.turn.sent)[:-1]

    def pause_words(self, turn: Turn[D], tail: int, text: str) -> list[str]:
        """The words of a pause's decode to send while its turn is still open (all: its audio ends in
        silence)."""
        closed = self.closed_words(turn, tail)
        return [] if closed is None else unsent(closed + text.split(), turn.sent)

    def closed_words(self, turn: Turn[D], tail: int) -> list[str] | None:
        """The words of ``turn``'s pieces, if it is still open with this tail and they are all read."""
        if self.turn is not turn or turn.tail != tail or not all(p.text.done() for p in turn.pieces):
            return None
        try:
            return [w for p in turn.pieces for w in p.text.result().split()]
        except (CancelledError, VoxlaneError):
            return None

    def context(self, start: int, end: int) -> tuple[list[Piece[D]], int]:
        """The closed pieces a final decode of [start, end) reads first (``context_s``), and where they begin."""
        back = int(self.context_s * SAMPLE_RATE)
        earliest = max(self.pcm_start, start - back, end - int(CONTEXT_WINDOW_S * SAMPLE_RATE))
        context: list[Piece[D]] = []
        first = start
        for piece in reversed(self._spoken):
            if piece.end != first or piece.start < earliest:
                break
            context.insert(0, piece)
            first = piece.start
        return context, first

    def cancel_partial(self) -> None:
        if self.partial is not None:
            self.partial.cancel()
            self.partial = None

    # --- steps -------------------------------------------------------------------------------------

    def _open(self, start: int) -> Turn[D]:
        if self.turn is None:
            self.turn = Turn(new_id("item"), start, self.last_item_id)
            self.partial_upto = start
        return self.turn

    def _close_piece(self, turn: Turn[D], end: int) -> None:
        decode = self._decodes.start_final(turn.tail, end)
        turn.pieces.append(Piece(turn.tail, end, decode))
        self._spoken.append(turn.pieces[-1])
        turn.tail = end
        self.partial_upto = end

    def _pause_ends(self, turn: Turn[D], end: int, quiet_from: int | None) -> bool:
        """If the silence that ends the turn is its pause's, that decode (started then) is its last piece."""
        if turn.pause is None or turn.pause[0] != quiet_from or turn.pause[1].start != turn.tail:
            return False
        piece = turn.pause[1]
        turn.pause = None
        self._decodes.count_pause_decode("final")
        turn.pieces.append(Piece(piece.start, end, piece.text))
        self._spoken.append(turn.pieces[-1])
        turn.tail = end
        return True

    def _drop_pause(self, turn: Turn[D]) -> None:
        """Cancel a pause's decode that will not be the turn's last piece (speech resumed, or the turn was
        cut or cleared)."""
        if turn.pause is not None:
            turn.pause[1].text.cancel()
            turn.pause = None
            self._decodes.count_pause_decode("speech_went_on")


def context_text(context: list[Piece[Any]], texts: list[object], start: int) -> tuple[int, str | None]:
    """Where a final decode of audio from ``start`` begins reading, and the text forced before it: the
    context pieces next to ``start`` whose ``texts`` (their decodes' results) are known."""
    spoken: list[str] = []
    begin = start
    for piece, text in zip(reversed(context), reversed(texts)):
        if not isinstance(text, str) or not text.strip():
            break  # failed, cancelled or silent: what its audio holds is not known, so it is not read
        spoken.insert(0, text.strip())
        begin = piece.start
    return begin, " ".join(spoken) or None


def completion_events(turn: Turn[Any], texts: list[str], shape: Shape, logprobs: bool) -> list[Event]:
    """A committed turn's last events once its pieces' ``texts`` are known: the words not yet sent as a
    delta, then ``...completed`` with the whole text (and GA's ``conversation.item.done``)."""
    transcript = " ".join(t.strip() for t in texts if t.strip())
    entries = [lp for t in texts for lp in getattr(t, "logprobs", None) or []] if logprobs else None
    end = turn.end
    events = []
    if rest := unsent(transcript.split(), turn.sent):
        events.append(turn.delta(rest, end))
    seconds = round((end - turn.start) / SAMPLE_RATE, 3)
    events.append(completed_event(turn.item_id, transcript, entries, seconds, ms(turn.start), ms(end)))
    if shape == "ga":
        events.append(item_done_event(turn.item_id, turn.previous_item_id, transcript))
    return events


def ms(sample: int) -> int:
    """A session sample's time in whole milliseconds."""
    return math.floor(sample * 1000 / SAMPLE_RATE)
