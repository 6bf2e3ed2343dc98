"""One live transcription session over a WebSocket: audio in, turns, partial and final text out.

The reader (``run``) handles the client's events in order. An append's chunk goes to the ``live`` pool
(base64, resampling to 16 kHz, Silero VAD: audio/live.py), never the event loop; the session's turn state
(turns.py: its audio, turns, pieces and the events they make, pure and synchronous) decides what each chunk
and turn-detection event means, and this module sends its events and runs its decodes on the engine.

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
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from voxlane.audio.denoise import spectral_gate
from voxlane.audio.live import SAMPLE_RATE, BadAudio, Fed, LiveInput, TurnEvent, partial_features
from voxlane.audio.pipeline import Speech, window_features
from voxlane.audio.split import quietest_point
from voxlane.errors import InvalidRequest, QueueFull, VoxlaneError
from voxlane.messages import Segment, TranscribeOptions, WindowRequest, WindowResult
from voxlane.server.formats import token_logprobs
from voxlane.server.realtime.events import (
    NOISE_REDUCTION_APPLIED,
    SessionSettings,
    Shape,
    apply_update,
    error_event,
    expiry,
    failed_event,
    new_id,
    session_json,
)
from voxlane.server.realtime.turns import (
    MIN_TURN_S,
    PartialRead,
    Piece,
    Turn,
    TurnState,
    completion_events,
    context_text,
)
from voxlane.server.state import AppState

log = logging.getLogger(__name__)

PARTIAL_DEADLINE_S = 0.5
FINAL_DEADLINE_S = 0.1
"""Engine priorities (``WindowRequest.deadline_s``): a final is due sooner than a partial."""

T = TypeVar("T")


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
        self.turns: TurnState[asyncio.Task[str]] = TurnState(self, self.config.realtime_context_s)
        self._completion: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._send_lock = asyncio.Lock()
        self._started = time.monotonic()

    # --- the reader ------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.send({"type": "session.created", "event_id": new_id("event"), "session": self._session()})
        ticker = self._spawn(self._tick())
        ends_at = self._started + self.config.realtime_max_session_s
        try:
            while (message := await self._receive(ends_at)) is not None:
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

    async def _receive(self, ends_at: float) -> Message | None:
        """The client's next message; None once the session was closed, idle or at its end (``ends_at``)."""
        while True:
            left_s = ends_at - time.monotonic()
            try:
                # asyncio.timeout, not wait_for: wait_for makes a task of every message the session receives.
                async with asyncio.timeout(max(0.0, min(self.config.realtime_idle_timeout_s, left_s))):
                    return await self.ws.receive()
            except TimeoutError:
                # Which limit timed out is known from the timeout given, not from the clock after it: a
                # timer may fire a little early (uvloop's run on a cached millisecond clock), and a
                # session at its end was then told it was idle.
                expired = left_s <= self.config.realtime_idle_timeout_s
                if not expired and self._finals_behind():
                    continue  # not idle while a turn's text is on its way
                await self._close(expired)
                return None

    async def _close(self, expired: bool) -> None:
        """Close the socket at the session's end (``expired``) or when it was idle, saying which."""
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
            vad_off = self.settings.turn_detection is not None and settings.turn_detection is None
            if self.turns.turn is not None and vad_off:
                await self._commit()  # turning VAD off commits the turn it had open
            self.live.close()
            self.live = LiveInput(
                settings.rate, settings.turn_detection, origin=self.turns.received, encoding=settings.encoding
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
        self.turns.check_rate(seconds, time.monotonic(), self.config.realtime_max_speed)
        held_s = self.turns.held_s()
        manual = self.settings.turn_detection is None
        if manual:
            self.turns.check_room(seconds, self.config.realtime_max_buffer_s)
        fed = await self._feed(audio)
        self.turns.take(fed.pcm, manual)
        for turn_event in fed.events:
            await self._on_turn_event(turn_event)
        await self._after_chunk(held_s)
        self.turns.let_go(self._pad_ms())

    async def _feed(self, audio: str) -> Fed:
        try:
            return await self.state.executors.run("live", self.live.feed, audio)
        except BadAudio as exc:
            raise InvalidRequest(str(exc), param="audio", code="invalid_audio") from None

    async def _on_turn_event(self, turn_event: TurnEvent) -> None:
        if turn_event.kind == "start":
            await self.send(self.turns.speech_started(turn_event.sample, self._pad_ms()))
        elif turn_event.kind == "pause":
            self.turns.pause(turn_event.sample, turn_event.quiet_from, behind=self._finals_behind())
        elif turn_event.kind == "resume":
            self.turns.resume()
        elif (stopped := self.turns.speech_stopped(turn_event.sample)) is not None:
            await self.send(stopped)
            await self._commit(end=min(turn_event.sample, self.turns.received), quiet_from=turn_event.quiet_from)

    async def _after_chunk(self, held_s: float) -> None:
        """An open turn that ran on: commit it (server_vad heard no pause for ``--realtime-max-buffer-s``),
        or cut it into pieces."""
        if self.turns.turn is None:
            return
        if self.settings.turn_detection is not None and held_s > self.config.realtime_max_buffer_s:
            await self._commit()  # speech with no pause for that long: commit what there is
        else:
            await self._cut_long_turn()

    async def _commit_event(self, event: dict[str, Any]) -> None:
        held_s = self.turns.held_s()
        if held_s < MIN_TURN_S:
            raise InvalidRequest(
                f"buffer too small: expected at least {MIN_TURN_S * 1000:.0f} ms of audio, but the buffer "
                f"only has {held_s * 1000:.0f} ms; send input_audio_buffer.append first",
                code="input_audio_buffer_commit_empty",
            )
        await self._commit()

    async def _clear(self, event: dict[str, Any]) -> None:
        await self.send(self.turns.clear(self._pad_ms()))

    # --- turns -----------------------------------------------------------------------------------

    async def _commit(self, end: int | None = None, quiet_from: int | None = None) -> None:
        committed = self.turns.commit(time.monotonic(), self.shape, end, quiet_from)
        if committed is None:
            return
        for event in committed.events:
            await self.send(event)
        previous = self._completion
        self._completion = self._spawn(self._complete(committed.turn, previous))

    async def _complete(self, turn: Turn[asyncio.Task[str]], previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        texts = []
        try:
            for piece in turn.pieces:
                texts.append(await piece.text)
        except VoxlaneError as exc:
            await self.error(exc)
            await self.send(failed_event(turn.item_id, exc))
            return
        for event in completion_events(turn, texts, self.shape, self.settings.logprobs):
            await self.send(event)
        metrics = self.state.metrics
        metrics.realtime_turns.inc()
        metrics.audio_seconds.inc((turn.end - turn.start) / SAMPLE_RATE)
        if turn.committed_at is not None:
            metrics.realtime_final_seconds.observe(time.monotonic() - turn.committed_at)

    async def _cut_long_turn(self) -> None:
        region = self.turns.cut_region()
        if region is None:
            return
        search_from, pcm = region
        self.turns.cut(search_from + await self.state.executors.run("live", quietest_point, pcm, SAMPLE_RATE))

    def _finals_behind(self) -> bool:
        """Whether the previous turn's text is not out yet (the engine is behind)."""
        return self._completion is not None and not self._completion.done()

    # --- the decodes the turn state starts (turns.Decodes) ---------------------------------------

    def start_final(self, start: int, end: int) -> asyncio.Task[str]:
        return self._spawn(self._final_decode(start, end))

    def start_at_pause(self, turn: Turn[asyncio.Task[str]], start: int, end: int) -> asyncio.Task[str]:
        task = self._spawn(self._pause_decode(turn, start, end))
        task.add_done_callback(_retrieve)
        return task

    def count_pause_decode(self, outcome: str) -> None:
        self.state.metrics.realtime_pause_decodes.labels(outcome).inc()

    async def _pause_decode(self, turn: Turn[asyncio.Task[str]], start: int, end: int) -> str:
        """A piece's final decode from ``start`` to a pause; while the turn is still open, the words past
        those already sent go out as a delta at once (all of them: the audio ends in silence)."""
        text = await self._final_decode(start, end)
        with contextlib.suppress(asyncio.CancelledError, VoxlaneError):
            if rest := self.turns.pause_words(turn, start, text):
                self.state.metrics.realtime_partials.inc()
                await self._delta(turn, rest, end)
        return text

    # --- partials --------------------------------------------------------------------------------

    async def _tick(self) -> None:
        interval = self.config.realtime_partial_interval_s
        while True:
            await asyncio.sleep(interval / 4)
            read = self.turns.partial_due(time.monotonic(), interval)
            if read is not None:
                self.turns.partial = self._spawn(self._partial_decode(read))

    async def _partial_decode(self, read: PartialRead[asyncio.Task[str]]) -> None:
        try:
            text = await self._decode(self.turns.audio(read.start, read.end), read.start, partial=True)
        except QueueFull:
            return  # the engine's queue is full: skip this partial, the next tick tries again
        except VoxlaneError as exc:
            await self.error(exc)
            return
        new = self.turns.partial_words(read, text)
        if new is None:
            return  # the turn moved on while this decoded
        self.state.metrics.realtime_partials.inc()
        if new:
            await self._delta(read.turn, new, read.end)

    async def _delta(self, turn: Turn[asyncio.Task[str]], words: list[str], end: int) -> None:
        await self.send(turn.delta(words, end))

    # --- decoding --------------------------------------------------------------------------------

    def _final_decode(self, start: int, end: int) -> Coroutine[Any, Any, str]:
        """The final text of session samples [start, end), read after the previous pieces that end where it
        starts (turns.py: ``CONTEXT_S``). Takes the audio now (the session may let it go later); the context
        is settled once those pieces' texts are known (a piece's decode waits for the ones before it)."""
        context, first = self.turns.context(start, end)
        return self._read_after(context, self.turns.audio(first, end), first, start)

    async def _read_after(
        self, context: list[Piece[asyncio.Task[str]]], pcm: np.ndarray, first: int, start: int
    ) -> str:
        """``pcm``: session samples from ``first`` (where ``context`` begins) to the piece's end."""
        texts = await asyncio.gather(*(p.text for p in context), return_exceptions=True)
        begin, prefix = context_text(context, list(texts), start)
        self.state.metrics.realtime_context_seconds.observe((start - begin) / SAMPLE_RATE)
        return await self._decode(pcm[begin - first :], begin, partial=False, prefix=prefix)

    async def _decode(self, pcm: np.ndarray, start: int, partial: bool, prefix: str | None = None) -> str:
        """Text of ``pcm`` (int16, 16 kHz, at most 30 s) from the engine, ahead of batch work."""
        engine = self.state.engine
        offset_s = start / SAMPLE_RATE
        asked = time.monotonic()
        features, n_frames, speech = await self._features(pcm, partial, offset_s)
        duration_s = len(pcm) / SAMPLE_RATE
        options = self._options(partial, prefix)
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
                return self._text_of(result, partial, offset_s + duration_s)
        return ""

    def _options(self, partial: bool, prefix: str | None) -> TranscribeOptions:
        """Partials decode greedy; finals with ``--realtime-beam-size`` (0: the engine's ``--beam-size``)."""
        return TranscribeOptions(
            language=self.settings.language,
            prompt=self.settings.prompt,
            prefix=prefix,
            beam_size=1 if partial else self.config.realtime_beam_size or None,
            logprobs=self.settings.logprobs and not partial,
        )

    async def _features(self, pcm: np.ndarray, partial: bool, offset_s: float) -> tuple[np.ndarray, int, Speech | None]:
        """A decode's log-mel features, how many frames hold audio, and (a final's) speech."""
        if self.settings.noise_reduction and NOISE_REDUCTION_APPLIED:
            pcm = await self.state.executors.run("live", gate_pcm16, pcm, self.settings.noise_reduction)
        if partial:
            features, n_frames = await self.state.executors.run("live", partial_features, pcm, self.model.n_mels)
            return features, n_frames, None
        return await self.state.executors.run("live", window_features, pcm, self.model.n_mels, offset_s)

    def _text_of(self, result: WindowResult, partial: bool, end_s: float) -> Transcript:
        """A decode's text from the engine's ``result`` (its audio ends at ``end_s``)."""
        if result.whole_retry or result.short:  # a final's: partials are never encoded short
            outcome = "whole_retry" if result.whole_retry else "short"
            self.state.metrics.realtime_short_finals.labels(outcome).inc()
        segments = result.segments
        if partial:  # a loop on features cut short repeats itself at the very end of the audio
            segments = [s for s in segments if s.start < end_s - 0.3]
        return Transcript.of(segments)

    # --- plumbing --------------------------------------------------------------------------------

    def _pad_ms(self) -> int:
        """server_vad's prefix padding; 0 without turn detection."""
        return self.settings.turn_detection.prefix_padding_ms if self.settings.turn_detection else 0

    def _session(self) -> dict[str, Any]:
        return session_json(self.id, self.settings, self.shape, expiry(self.config.realtime_max_session_s))

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
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


def gate_pcm16(pcm: np.ndarray, strength: str) -> np.ndarray:
    """``pcm`` (int16) through the spectral gate (audio/denoise.py)."""
    gated = spectral_gate(pcm.astype(np.float32) / 32768.0, strength)
    return np.clip(np.round(gated * 32768.0), -32768, 32767).astype(np.int16)


_HANDLERS = {
    "session.update": RealtimeSession._update,
    "transcription_session.update": RealtimeSession._update,
    "input_audio_buffer.append": RealtimeSession._append,
    "input_audio_buffer.commit": RealtimeSession._commit_event,
    "input_audio_buffer.clear": RealtimeSession._clear,
}
