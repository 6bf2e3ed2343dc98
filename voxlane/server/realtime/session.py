"""One live transcription session over a WebSocket: audio in, turns, partial and final text out.

The reader (``run``) handles the client's events in order. An append's chunk goes to the ``live`` pool
(base64, resampling to 16 kHz, Silero VAD: audio/live.py), never the event loop; turn detection's start
and stop open and commit turns. A turn's audio is kept as *pieces* of at most ``PIECE_S``: when an open
turn grows past that, it is cut at its quietest 100 ms of the last ``CUT_SEARCH_S`` and the piece is
decoded at once, as the batch endpoint decodes a window (30 s of features; same text). The rest, the
*tail*, is what partials re-decode.

Three kinds of work run beside the reader:
- partials: a ticker starts one decode of the open turn's tail every ``--realtime-partial-interval-s``
  (one at a time; features cut to the audio, engine priority ``PARTIAL_DEADLINE_S``), and sends the
  words past those already sent as a ``...delta`` (the last word is held back: it may be cut off). None
  starts while a pause's decode is out: the audio since then is quiet, and that decode sends every word;
- finals: each closed piece's decode (priority ``FINAL_DEADLINE_S``). With server_vad the last piece's
  decode starts at the turn's *pause* (audio/live.py: ``PAUSE_MS`` into the silence), while server_vad still
  waits for ``silence_duration_ms``; if that silence ends the turn, the decode is the turn's last piece
  (its audio ends at the pause: what follows is silence), and if speech resumes first (audio/live.py's
  *resume*), the decode is dropped (the engine skips it if it has not started: a final costs several
  partials) and partials go on;
- completions: once a turn is committed and its pieces are decoded, the words not yet sent as a delta,
  then ``...completed`` with the whole text. Completions go out in turn order.

Limits: ``--realtime-max-buffer-s`` of uncommitted audio, ``--realtime-max-speed`` times real time,
``--realtime-idle-timeout-s`` with no event, ``--realtime-max-session-s`` in all. Every problem with a
client's event is an ``error`` event and the socket stays open; the server closes it (after an error event
that says why) only at the idle timeout, the session's end, or when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.websockets import WebSocket, WebSocketDisconnect

from voxlane.audio.denoise import spectral_gate
from voxlane.audio.live import SAMPLE_RATE, BadAudio, LiveInput, partial_features, unsent
from voxlane.audio.pipeline import window_features
from voxlane.audio.split import quietest_point
from voxlane.errors import InvalidRequest, QueueFull, VoxlaneError
from voxlane.messages import Segment, TranscribeOptions, WindowRequest
from voxlane.server.formats import token_logprobs
from voxlane.server.realtime.events import (
    NOISE_REDUCTION_APPLIED,
    SessionSettings,
    Shape,
    apply_update,
    error_event,
    expiry,
    new_id,
    session_json,
)
from voxlane.server.state import AppState
from voxlane.text.repeats import cut_repeats

log = logging.getLogger(__name__)

PIECE_S = 28.0
"""An open turn longer than this is cut: a piece is at most one Whisper window (30 s)."""
CUT_SEARCH_S = 8.0
"""Where a long turn is cut: the quietest 100 ms of its last seconds (as long uploads are cut)."""
MIN_TURN_S = 0.1
"""A commit of less audio than this is refused (OpenAI: at least 100 ms)."""
MIN_PARTIAL_S = 0.5
"""A tail with less speech than this (server_vad: counted from where speech started, not from the padding
and look-back before it) is not worth a partial decode."""
PARTIAL_DEADLINE_S = 0.5
FINAL_DEADLINE_S = 0.1
"""Engine priorities (``WindowRequest.deadline_s``): a final is due sooner than a partial."""
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
"""A final decode's window also holds the audio of the session's previous pieces (turns, or a long turn's
earlier parts) that end where it starts, at most this far back, with their text forced as the start of
the transcript (``TranscribeOptions.prefix``). Whisper tiny reads a turn of a few words worse than the
same words inside 30 s of speech; with the context, the long set's turns read 5.8% WER offline against
7.4% alone (docs/benchmarks.md). The encoder's cost is the same (30 s either way); the decoder pays ~4 ms
a forced token."""
CONTEXT_WINDOW_S = 29.0
"""The context and the piece together fit in one 30 s window."""
BURST_S = 10.0
"""Audio a session may send at once before --realtime-max-speed applies (a client may send a clip whole)."""


def _words(text: str) -> list[str]:
    return text.split()


@dataclass(eq=False)
class Piece:
    start: int
    end: int
    text: asyncio.Task[str]


@dataclass(eq=False)
class Turn:
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
    pieces: list[Piece] = field(default_factory=list)
    pause: tuple[int, Piece] | None = None
    """The decode started at the last pause: (where its quiet began, the piece from ``tail`` to the pause)."""
    sent: list[str] = field(default_factory=list)
    """Words sent as deltas so far."""
    committed_at: float | None = None

    def __post_init__(self) -> None:
        self.tail = self.speech_from = self.partial_from = self.start


class RealtimeSession:
    def __init__(self, ws: WebSocket, state: AppState) -> None:
        self.ws = ws
        self.state = state
        self.config = state.config
        self.id = new_id("sess")
        self.settings = SessionSettings()
        self.model = state.models.default
        """The Whisper model of the session's decodes (its transcription ``model``)."""
        self.shape: Shape = "ga"
        self.live = LiveInput(self.settings.rate, self.settings.turn_detection, encoding=self.settings.encoding)
        self._pcm: list[np.ndarray] = []
        self._pcm_start = 0
        """Session sample of the first kept sample (older audio is let go)."""
        self.received = 0
        """Session samples received (16 kHz)."""
        self.turn: Turn | None = None
        self._spoken: deque[Piece] = deque(maxlen=32)
        """The session's closed pieces, in order: the context a final decode may read before its audio."""
        self._last_item_id: str | None = None
        self._last_turn_end = 0
        self._completion: asyncio.Task[None] | None = None
        self._partial: asyncio.Task[None] | None = None
        self._partial_upto = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._send_lock = asyncio.Lock()
        self._first_audio_at: float | None = None
        self._last_partial_at = 0.0
        self._started = time.monotonic()

    # --- the reader ------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.send({"type": "session.created", "event_id": new_id("event"), "session": self._session()})
        ticker = self._spawn(self._tick())
        ends_at = self._started + self.config.realtime_max_session_s
        try:
            while True:
                left_s = ends_at - time.monotonic()
                try:
                    message = await asyncio.wait_for(
                        self.ws.receive(), timeout=max(0.0, min(self.config.realtime_idle_timeout_s, left_s))
                    )
                except TimeoutError:
                    # Which limit timed out is known from the timeout given, not from the clock after it: a
                    # timer may fire a little early (uvloop's run on a cached millisecond clock), and a
                    # session at its end was then told it was idle.
                    expired = left_s <= self.config.realtime_idle_timeout_s
                    if not expired and self._completion is not None and not self._completion.done():
                        continue  # not idle while a turn's text is on its way
                    await self.error(
                        InvalidRequest(
                            f"the session reached its {self.config.realtime_max_session_s:g} s limit "
                            "(--realtime-max-session-s); open a new one"
                            if expired
                            else f"no event for {self.config.realtime_idle_timeout_s:g} s "
                            "(--realtime-idle-timeout-s); the session is closed",
                            code="session_expired" if expired else "idle_timeout",
                        )
                    )
                    await self.ws.close(1000)
                    return
                if message["type"] == "websocket.disconnect":
                    return
                await self._dispatch(dict(message))
        except WebSocketDisconnect:
            return
        finally:
            ticker.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self.live.close()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        text = message.get("text")
        if text is None:
            await self.error(
                InvalidRequest("binary frames are not events; send JSON text frames", code="invalid_event")
            )
            return
        try:
            event = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            await self.error(InvalidRequest("the message is not valid JSON; send one JSON event", code="invalid_json"))
            return
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            await self.error(
                InvalidRequest("an event is a JSON object with a 'type'", param="type", code="invalid_event")
            )
            return
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        handler = _HANDLERS.get(event["type"])
        if handler is None:
            await self.error(
                InvalidRequest(
                    f"unknown or unsupported event type {event['type']!r}; a transcription session takes "
                    + ", ".join(sorted(_HANDLERS)),
                    param="type",
                    code="invalid_event",
                ),
                event_id,
            )
            return
        try:
            await handler(self, event)
        except VoxlaneError as exc:
            await self.error(exc, event_id)

    # --- client events ---------------------------------------------------------------------------

    async def _update(self, event: dict[str, Any]) -> None:
        settings, shape = apply_update(self.settings, event)
        model = await self.state.whisper_model(settings.model)  # 404 error event: the session keeps its model
        if settings.language not in (None, "en") and not model.multilingual:
            raise InvalidRequest(
                f"the model '{model.name}' is English-only; send language 'en' or leave it out, not "
                f"{settings.language!r}, or send a multilingual model (whisper-base)",
                param="session.audio.input.transcription.language",
            )
        self.model = model
        heard = (settings.rate, settings.encoding, settings.turn_detection)
        if heard != (self.settings.rate, self.settings.encoding, self.settings.turn_detection):
            if self.turn is not None and self.settings.turn_detection is not None and settings.turn_detection is None:
                await self._commit()  # turning VAD off commits the turn it had open
            self.live.close()
            self.live = LiveInput(
                settings.rate, settings.turn_detection, origin=self.received, encoding=settings.encoding
            )
        self.settings, self.shape = settings, shape
        kind = "transcription_session.updated" if shape == "beta" else "session.updated"
        await self.send({"type": kind, "event_id": new_id("event"), "session": self._session()})

    async def _append(self, event: dict[str, Any]) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise InvalidRequest(f"missing 'audio': send base64 of {self.settings.encoding} audio", param="audio")
        bytes_per_sample = 2 if self.settings.encoding == "pcm16" else 1  # G.711: a byte a sample
        seconds = len(audio) * 3 / 4 / bytes_per_sample / self.settings.rate
        now = time.monotonic()
        if self._first_audio_at is None:
            self._first_audio_at = now
        allowed_s = BURST_S + self.config.realtime_max_speed * (now - self._first_audio_at)
        if self.received / SAMPLE_RATE + seconds > allowed_s:
            raise QueueFull(
                f"audio is arriving faster than {self.config.realtime_max_speed:g}x real time "
                "(--realtime-max-speed); this chunk was dropped: send audio as it is recorded",
                retry_after_s=seconds,
                code="rate_limit_exceeded",
            )
        held_s = 0.0 if self.turn is None else (self.received - self.turn.start) / SAMPLE_RATE
        if self.settings.turn_detection is None and held_s + seconds > self.config.realtime_max_buffer_s:
            raise InvalidRequest(
                f"the input audio buffer holds {held_s:.1f} s, the most this server keeps uncommitted is "
                f"{self.config.realtime_max_buffer_s:g} s (--realtime-max-buffer-s); this chunk was dropped: "
                "send input_audio_buffer.commit first",
                param="audio",
                code="input_audio_buffer_full",
            )
        try:
            fed = await self.state.executors.run("live", self.live.feed, audio)
        except BadAudio as exc:
            raise InvalidRequest(str(exc), param="audio", code="invalid_audio") from None
        start = self.received
        self._pcm.append(fed.pcm)
        self.received += len(fed.pcm)
        if self.settings.turn_detection is None and self.turn is None and len(fed.pcm):
            self._open(start)
        for turn_event in fed.events:
            if turn_event.kind == "start":
                earliest = max(self._last_turn_end, self._pcm_start)
                self._open(max(turn_event.sample - int(GAP_LOOKBACK_S * SAMPLE_RATE), earliest))
                assert self.turn is not None
                pad = self.settings.turn_detection.prefix_padding_ms if self.settings.turn_detection else 0
                self.turn.speech_from = turn_event.sample + pad * SAMPLE_RATE // 1000
                self.turn.partial_from = max(turn_event.sample - int(LOOKBACK_S * SAMPLE_RATE), earliest)
                await self.send(
                    {
                        "type": "input_audio_buffer.speech_started",
                        "event_id": new_id("event"),
                        "item_id": self.turn.item_id,
                        "audio_start_ms": _ms(max(turn_event.sample, self.turn.start)),
                    }
                )
            elif turn_event.kind == "pause":
                if self.turn is not None:
                    self._start_pause_decode(self.turn, min(turn_event.sample, self.received), turn_event.quiet_from)
            elif turn_event.kind == "resume":
                if self.turn is not None:
                    self._drop_pause_decode(self.turn)
            elif self.turn is not None:
                await self.send(
                    {
                        "type": "input_audio_buffer.speech_stopped",
                        "event_id": new_id("event"),
                        "item_id": self.turn.item_id,
                        "audio_end_ms": _ms(turn_event.sample),
                    }
                )
                await self._commit(end=min(turn_event.sample, self.received), quiet_from=turn_event.quiet_from)
        if self.turn is not None:
            if self.settings.turn_detection is not None and held_s > self.config.realtime_max_buffer_s:
                await self._commit()  # speech with no pause for that long: commit what there is
            else:
                await self._cut_long_turn()
        self._let_go()

    async def _commit_event(self, event: dict[str, Any]) -> None:
        held_s = 0.0 if self.turn is None else (self.received - self.turn.start) / SAMPLE_RATE
        if held_s < MIN_TURN_S:
            raise InvalidRequest(
                f"buffer too small: expected at least {MIN_TURN_S * 1000:.0f} ms of audio, but the buffer "
                f"only has {held_s * 1000:.0f} ms; send input_audio_buffer.append first",
                code="input_audio_buffer_commit_empty",
            )
        await self._commit()

    async def _clear(self, event: dict[str, Any]) -> None:
        if self.turn is not None:
            self._drop_pause_decode(self.turn)
            for piece in self.turn.pieces:
                piece.text.cancel()
            self.turn = None
            self._cancel_partial()
        self._let_go()
        await self.send({"type": "input_audio_buffer.cleared", "event_id": new_id("event")})

    # --- turns -----------------------------------------------------------------------------------

    def _open(self, start: int) -> None:
        if self.turn is None:
            self.turn = Turn(new_id("item"), start, self._last_item_id)
            self._partial_upto = start

    async def _commit(self, end: int | None = None, quiet_from: int | None = None) -> None:
        turn = self.turn
        if turn is None:
            return
        end = self.received if end is None else end
        self.turn = None
        self._last_turn_end = end
        self._cancel_partial()
        if turn.pause is not None and turn.pause[0] == quiet_from and turn.pause[1].start == turn.tail:
            # the silence that ends the turn is the pause's: its decode (started then) is the last piece
            piece = turn.pause[1]
            turn.pause = None
            self.state.metrics.realtime_pause_decodes.labels("final").inc()
            turn.pieces.append(Piece(piece.start, end, piece.text))
            self._spoken.append(turn.pieces[-1])
            turn.tail = end
        else:
            self._drop_pause_decode(turn)
        if end > turn.tail:
            self._close_piece(turn, end)
        turn.committed_at = time.monotonic()
        await self.send(
            {
                "type": "input_audio_buffer.committed",
                "event_id": new_id("event"),
                "item_id": turn.item_id,
                "previous_item_id": turn.previous_item_id,
            }
        )
        await self.send(
            {
                "type": "conversation.item.added" if self.shape == "ga" else "conversation.item.created",
                "event_id": new_id("event"),
                "previous_item_id": turn.previous_item_id,
                "item": _item(turn.item_id, "in_progress", None),
            }
        )
        self._last_item_id = turn.item_id
        previous = self._completion
        self._completion = self._spawn(self._complete(turn, previous))

    async def _cut_long_turn(self) -> None:
        turn = self.turn
        assert turn is not None
        if (self.received - turn.tail) / SAMPLE_RATE <= PIECE_S:
            return
        search_from = self.received - int(CUT_SEARCH_S * SAMPLE_RATE)
        region = self._audio(search_from, self.received)
        cut = search_from + await self.state.executors.run("live", quietest_point, region, SAMPLE_RATE)
        self._cancel_partial()
        self._drop_pause_decode(turn)
        self._close_piece(turn, cut)

    def _close_piece(self, turn: Turn, end: int) -> None:
        task = self._spawn(self._final_decode(turn.tail, end))
        turn.pieces.append(Piece(turn.tail, end, task))
        self._spoken.append(turn.pieces[-1])
        turn.tail = end
        self._partial_upto = end

    def _start_pause_decode(self, turn: Turn, end: int, quiet_from: int) -> None:
        """Start the turn's final decode at a pause (see the module's docstring). Partials wait for it or
        for speech to resume (``_drop_pause_decode``)."""
        if end - turn.tail < int(MIN_TURN_S * SAMPLE_RATE):
            return
        if self._completion is not None and not self._completion.done():
            return  # the previous turn's text is not out yet: the engine is behind, and this one waits for it
        self._drop_pause_decode(turn)
        task = self._spawn(self._pause_decode(turn, turn.tail, end))
        task.add_done_callback(_retrieve)
        turn.pause = (quiet_from, Piece(turn.tail, end, task))

    async def _pause_decode(self, turn: Turn, start: int, end: int) -> str:
        """A piece's final decode from ``start`` to a pause; while the turn is still open, the words past
        those already sent go out as a delta at once (all of them: the audio ends in silence)."""
        text = await self._final_decode(start, end)
        if self.turn is turn and turn.tail == start and all(p.text.done() for p in turn.pieces):
            with contextlib.suppress(asyncio.CancelledError, VoxlaneError):
                words = [w for p in turn.pieces for w in _words(p.text.result())] + _words(text)
                if rest := unsent(words, turn.sent):
                    self.state.metrics.realtime_partials.inc()
                    await self._delta(turn, rest, end)
        return text

    def _drop_pause_decode(self, turn: Turn) -> None:
        """Cancel a pause's decode that will not be the turn's last piece (speech resumed, or the turn was
        cut or cleared)."""
        if turn.pause is not None:
            turn.pause[1].text.cancel()
            turn.pause = None
            self.state.metrics.realtime_pause_decodes.labels("speech_went_on").inc()

    async def _complete(self, turn: Turn, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        texts = []
        try:
            for piece in turn.pieces:
                texts.append(await piece.text)
        except VoxlaneError as exc:
            await self.error(exc)
            await self.send(
                {
                    "type": "conversation.item.input_audio_transcription.failed",
                    "event_id": new_id("event"),
                    "item_id": turn.item_id,
                    "content_index": 0,
                    "error": {"type": exc.error_type, "code": exc.code, "message": exc.message, "param": exc.param},
                }
            )
            return
        transcript = " ".join(t.strip() for t in texts if t.strip())
        logprobs = [lp for t in texts for lp in getattr(t, "logprobs", None) or []] if self.settings.logprobs else None
        rest = unsent(_words(transcript), turn.sent)
        end = turn.pieces[-1].end if turn.pieces else turn.start
        if rest:
            await self._delta(turn, rest, end)
        await self.send(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "event_id": new_id("event"),
                "item_id": turn.item_id,
                "content_index": 0,
                "transcript": transcript,
                "logprobs": logprobs,
                "usage": {"type": "duration", "seconds": round((end - turn.start) / SAMPLE_RATE, 3)},
                "audio_start_ms": _ms(turn.start),  # voxlane: where the turn's audio lies in the session
                "audio_end_ms": _ms(end),
            }
        )
        if self.shape == "ga":
            await self.send(
                {
                    "type": "conversation.item.done",
                    "event_id": new_id("event"),
                    "previous_item_id": turn.previous_item_id,
                    "item": _item(turn.item_id, "completed", transcript),
                }
            )
        metrics = self.state.metrics
        metrics.realtime_turns.inc()
        metrics.audio_seconds.inc((end - turn.start) / SAMPLE_RATE)
        if turn.committed_at is not None:
            metrics.realtime_final_seconds.observe(time.monotonic() - turn.committed_at)

    # --- partials --------------------------------------------------------------------------------

    async def _tick(self) -> None:
        interval = self.config.realtime_partial_interval_s
        while True:
            await asyncio.sleep(interval / 4)
            turn = self.turn
            if turn is None or turn.pause is not None or (self._partial is not None and not self._partial.done()):
                continue
            speech_s = (self.received - max(turn.tail, turn.speech_from)) / SAMPLE_RATE
            if speech_s < MIN_PARTIAL_S or self.received <= self._partial_upto:
                continue
            if time.monotonic() - self._last_partial_at < interval:
                continue
            self._last_partial_at = time.monotonic()
            self._partial_upto = self.received
            self._partial = self._spawn(self._partial_decode(turn, turn.tail, self.received))

    async def _partial_decode(self, turn: Turn, tail: int, end: int) -> None:
        start = max(tail, turn.partial_from)
        try:
            text = await self._decode(self._audio(start, end), start, partial=True)
        except QueueFull:
            return  # the engine's queue is full: skip this partial, the next tick tries again
        except VoxlaneError as exc:
            await self.error(exc)
            return
        if self.turn is not turn or turn.tail != tail or not all(p.text.done() for p in turn.pieces):
            return  # the turn moved on while this decoded
        try:
            closed = [w for p in turn.pieces for w in _words(p.text.result())]
        except (asyncio.CancelledError, VoxlaneError):
            return
        words = closed + cut_repeats(_words(text))
        new = unsent(words, turn.sent)[:-1]  # the last word may be cut off mid-word: held back
        self.state.metrics.realtime_partials.inc()
        if new:
            await self._delta(turn, new, end)

    def _cancel_partial(self) -> None:
        if self._partial is not None:
            self._partial.cancel()
            self._partial = None

    async def _delta(self, turn: Turn, words: list[str], end: int) -> None:
        text = (" " if turn.sent else "") + " ".join(words)
        turn.sent += words
        await self.send(
            {
                "type": "conversation.item.input_audio_transcription.delta",
                "event_id": new_id("event"),
                "item_id": turn.item_id,
                "content_index": 0,
                "delta": text,
                "logprobs": None,
                "audio_end_ms": _ms(end),  # voxlane: the audio this text was read from ends here
            }
        )

    # --- decoding --------------------------------------------------------------------------------

    def _final_decode(self, start: int, end: int) -> Awaitable[str]:
        """The final text of session samples [start, end), read after the previous pieces that end where it
        starts (``CONTEXT_S``). Takes the audio now (the session may let it go later); the context is
        settled once those pieces' texts are known (a piece's decode waits for the ones before it)."""
        earliest = max(self._pcm_start, start - int(CONTEXT_S * SAMPLE_RATE), end - int(CONTEXT_WINDOW_S * SAMPLE_RATE))
        context: list[Piece] = []
        first = start
        for piece in reversed(self._spoken):
            if piece.end != first or piece.start < earliest:
                break
            context.insert(0, piece)
            first = piece.start
        return self._read_after(context, self._audio(first, end), first, start)

    async def _read_after(self, context: list[Piece], pcm: np.ndarray, first: int, start: int) -> str:
        """``pcm``: session samples from ``first`` (where ``context`` begins) to the piece's end."""
        texts = await asyncio.gather(*(p.text for p in context), return_exceptions=True)
        spoken: list[str] = []
        begin = start
        for piece, text in zip(reversed(context), reversed(texts)):  # the pieces next to ``start`` first
            if not isinstance(text, str) or not text.strip():
                break  # failed, cancelled or silent: what its audio holds is not known, so it is not read
            spoken.insert(0, text.strip())
            begin = piece.start
        self.state.metrics.realtime_context_seconds.observe((start - begin) / SAMPLE_RATE)
        return await self._decode(pcm[begin - first :], begin, partial=False, prefix=" ".join(spoken) or None)

    async def _decode(self, pcm: np.ndarray, start: int, partial: bool, prefix: str | None = None) -> str:
        """Text of ``pcm`` (int16, 16 kHz, at most 30 s) from the engine, ahead of batch work."""
        engine = self.state.engine
        n_mels = self.model.n_mels
        offset_s = start / SAMPLE_RATE
        speech = None
        asked = time.monotonic()
        if self.settings.noise_reduction and NOISE_REDUCTION_APPLIED:
            pcm = await self.state.executors.run("live", gate_pcm16, pcm, self.settings.noise_reduction)
        if partial:
            features, n_frames = await self.state.executors.run("live", partial_features, pcm, n_mels)
        else:
            features, n_frames, speech = await self.state.executors.run("live", window_features, pcm, n_mels, offset_s)
        duration_s = len(pcm) / SAMPLE_RATE
        options = TranscribeOptions(
            language=self.settings.language,
            prompt=self.settings.prompt,
            prefix=prefix,
            beam_size=1 if partial else self.config.realtime_beam_size or None,
            logprobs=self.settings.logprobs and not partial,
        )
        request_id = f"rt-{uuid.uuid4().hex}"
        async with engine.request(request_id, [duration_s]) as stream:
            await engine.send(
                WindowRequest(
                    request_id,
                    0,
                    1,
                    offset_s=offset_s,
                    duration_s=duration_s,
                    n_frames=n_frames,
                    n_mels=features.shape[0],
                    options=options,
                    speech=speech,
                    deadline_s=PARTIAL_DEADLINE_S if partial else FINAL_DEADLINE_S,
                    partial=partial,
                    model="" if self.model.path == self.state.models.default.path else self.model.path,
                ),
                features,
            )
            beam_size = options.beam_size or self.config.engine.beam_size
            self.state.metrics.realtime_decodes.labels("partial" if partial else "final", str(beam_size)).inc()
            async for result in stream.results(self.config.request_timeout_s):
                if result.error:
                    raise VoxlaneError(f"transcription failed: {result.error}")
                log.debug(
                    "realtime %s: %.2f s of audio, %d frames, %.0f ms",
                    "partial" if partial else "final",
                    duration_s,
                    features.shape[1],
                    (time.monotonic() - asked) * 1000,
                )
                if result.whole_retry or result.short:  # a final's: partials are never encoded short
                    outcome = "whole_retry" if result.whole_retry else "short"
                    self.state.metrics.realtime_short_finals.labels(outcome).inc()
                segments = result.segments
                if partial:  # a loop on features cut short repeats itself at the very end of the audio
                    segments = [s for s in segments if s.start < offset_s + duration_s - 0.3]
                return Transcript.of(segments)
        return ""

    # --- plumbing --------------------------------------------------------------------------------

    def _audio(self, start: int, end: int) -> np.ndarray:
        """Session samples [start, end) (they must still be kept)."""
        if len(self._pcm) != 1:
            self._pcm = [np.concatenate(self._pcm)] if self._pcm else [np.zeros(0, dtype=np.int16)]
        return self._pcm[0][start - self._pcm_start : end - self._pcm_start].copy()

    def _let_go(self) -> None:
        """Drop audio no turn can need: more than ``CONTEXT_S`` before the open turn's tail, or before the
        VAD's prefix padding and ``GAP_LOOKBACK_S``."""
        if self.turn is not None:
            keep_from = self.turn.tail
        else:
            pad = self.settings.turn_detection.prefix_padding_ms if self.settings.turn_detection else 0
            keep_from = self.received - (pad + 100) * SAMPLE_RATE // 1000 - int(GAP_LOOKBACK_S * SAMPLE_RATE)
        keep_from -= int(CONTEXT_S * SAMPLE_RATE)
        if keep_from - self._pcm_start < SAMPLE_RATE:  # let go a second or more at a time
            return
        kept = self._audio(max(keep_from, self._pcm_start), self.received)
        self._pcm, self._pcm_start = [kept], self.received - len(kept)

    def _session(self) -> dict[str, Any]:
        return session_json(self.id, self.settings, self.shape, expiry(self.config.realtime_max_session_s))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def send(self, event: dict[str, Any]) -> None:
        # A client that left raises here; the reader sees the disconnect and ends the session.
        async with self._send_lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await self.ws.send_text(json.dumps(event))

    async def error(self, exc: VoxlaneError, event_id: str | None = None) -> None:
        self.state.metrics.realtime_errors.labels(exc.code or exc.error_type).inc()
        await self.send(error_event(exc, event_id))


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Done callback of a task no one may await (a dropped pause decode): mark its error as seen."""
    if not task.cancelled():
        task.exception()


class Transcript(str):
    """A decode's text, with its tokens' log-probabilities (OpenAI's ``logprobs`` entries) when the session
    asked for them (``include``); a piece's text task holds one, and the turn's final event joins them."""

    logprobs: list[dict[str, object]] | None = None

    @classmethod
    def of(cls, segments: list[Segment]) -> Transcript:
        text = cls("".join(s.text for s in segments).strip())
        if any(s.logprobs is not None for s in segments):
            text.logprobs = token_logprobs(segments)
        return text


def _item(item_id: str, status: str, transcript: str | None) -> dict[str, Any]:
    """The user's audio message that a turn becomes (OpenAI's conversation item)."""
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": status,
        "role": "user",
        "content": [{"type": "input_audio", "transcript": transcript}],
    }


def gate_pcm16(pcm: np.ndarray, strength: str) -> np.ndarray:
    """``pcm`` (int16) through the spectral gate (audio/denoise.py)."""
    gated = spectral_gate(pcm.astype(np.float32) / 32768.0, strength)
    return np.clip(np.round(gated * 32768.0), -32768, 32767).astype(np.int16)


def _ms(sample: int) -> int:
    return math.floor(sample * 1000 / SAMPLE_RATE)


_HANDLERS = {
    "session.update": RealtimeSession._update,
    "transcription_session.update": RealtimeSession._update,
    "input_audio_buffer.append": RealtimeSession._append,
    "input_audio_buffer.commit": RealtimeSession._commit_event,
    "input_audio_buffer.clear": RealtimeSession._clear,
}
