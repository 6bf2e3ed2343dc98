"""POST /v1/audio/speech: text in, audio streamed out as it is synthesised.

Path of a request: validate and resolve the voice (event loop, cheap; a lease on the voice version) ->
read SSML if it is some, split into units and phonemise the first (text pool) -> send to the engine,
phonemising the rest in the background -> each unit's PCM, and the silence SSML asks for after it, is encoded
(encode pool) and streamed. With ``timestamps=["word"]`` (SSE only) the text pool also ties the input's
words to marks in each unit's phoneme ids (text/timings.py), the engine returns the marks' sample offsets,
and each event carries the words its audio completes. The response starts only once the first audio is
encoded, so every error before that is a real 4xx/5xx; an error after it ends the stream, is logged and counted
(``voxlane_stream_errors_total``). A client that goes away aborts its units in the engine and releases the
voice.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from voxlane.audio.encode import MEDIA_TYPES, close_stream, encode_stream, finish_stream, open_stream
from voxlane.audio.gaps import BreakGaps
from voxlane.config import SPEECH_MODEL
from voxlane.engine.client import ResultStream, SpeechResult
from voxlane.errors import InvalidRequest, ModelNotFound, VoxlaneError
from voxlane.messages import SpeechUnit
from voxlane.models import ModelNotPresent, resolve_voice, voice_repo_path
from voxlane.protocol import (
    CaptionedSpeechRequest,
    CaptionedSpeechResponse,
    SpeechAudioDelta,
    SpeechAudioDone,
    SpeechRequest,
    SpeechUsage,
    SpeechWord,
    WordTimestamp,
    error_responses,
    sse_content,
)
from voxlane.server.sse import event_stream
from voxlane.server.state import AppState, get_state
from voxlane.text.phonemes import pause_ids, prepare, prepare_timed, unit_ids, unit_ids_marked
from voxlane.text.ssml import SsmlError, SsmlUnit
from voxlane.text.timings import PlannedWord, WordTime, unit_marks_s, word_times
from voxlane.voice_config import VoiceConfig
from voxlane.voices import Voice, remove_dir

log = logging.getLogger(__name__)
router = APIRouter()

CLOSE_TIMEOUT_S = 10.0
"""Longest a finished or abandoned stream's clean-up may take (closing its encoder in its worker)."""

_AUDIO = {"schema": {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The audio in response_format, streamed as it is synthesised; with stream_format=sse, "
        "server-sent events (speech.audio.delta with base64 audio, then speech.audio.done).",
        "content": {
            **{media_type: _AUDIO for media_type in sorted(set(MEDIA_TYPES.values()))},
            "text/event-stream": sse_content(SpeechAudioDelta, SpeechAudioDone),
        },
    },
    **error_responses(400, 404, 503),
}


@router.post("/v1/audio/speech", response_class=StreamingResponse, responses=_RESPONSES)
async def create_speech(body: SpeechRequest, request: Request) -> Response:
    arrived_s = time.perf_counter()
    state = get_state(request)
    _validate(body, state)
    voice = await _voice(state, body.voice)
    state.engine.check_alive()
    state.engine.check_speech(len(body.input))  # a full queue answers 429 before any text work
    job = _SpeechJob(state, body, voice)
    await job.start(arrived_s)  # on failure the job has cleaned up; the error handler answers with a 4xx/5xx
    if body.stream_format == "sse":
        return event_stream(_sse_audio(job), state.metrics, f"speech stream {job.request_id}")
    return StreamingResponse(_audio(job), media_type=job.media_type)


async def _voice(state: AppState, name: str) -> Voice:
    """The voice ``name``: the default, an uploaded one, one served by name (--voice), or a Piper voice name
    found in the Hugging Face cache's rhasspy/piper-voices (read on the files pool, then remembered)."""
    registry = state.voices
    assert registry is not None
    try:
        return registry.resolve(name)
    except InvalidRequest:
        if voice_repo_path(name) is None:
            raise
    try:
        files = await state.executors.run("files", resolve_voice, name, state.config.hub, state.config.models_dir)
    except ModelNotPresent as exc:
        raise InvalidRequest(str(exc), param="voice", code="voice_not_found") from None
    return registry.remember(name, files.model_path, files.config_path)


def _validate(body: SpeechRequest, state: AppState) -> None:
    if not state.models.is_speech(body.model):
        speech = [name for name in state.models.aliases if state.models.is_speech(name)]
        raise ModelNotFound(
            f"the speech model '{body.model}' does not exist on this server; send model='{SPEECH_MODEL}' "
            f"(or one of its aliases: {', '.join(speech)})"
        )
    if not body.input.strip():
        raise InvalidRequest("'input' is empty; send the text to speak", param="input", code="empty_input")
    limit = state.config.max_speech_input_chars
    if len(body.input) > limit:
        raise InvalidRequest(
            f"'input' is {len(body.input)} characters, over the limit of {limit} "
            "(--max-speech-input-chars): split the text into several requests",
            param="input",
            code="input_too_long",
        )
    if body.timestamps and body.stream_format != "sse":
        raise InvalidRequest(
            "word timestamps come in server-sent events: send stream_format='sse' with timestamps=['word'] "
            "(or use POST /dev/captioned_speech for JSON)",
            param="timestamps",
        )


class _SpeechJob:
    """One speech request: its voice lease, its engine stream, its encoder and its feeder task; with word
    timings, the plan of its words and the words heard so far."""

    def __init__(self, state: AppState, body: SpeechRequest, voice: Voice) -> None:
        self.state = state
        self.body = body
        self.voice = voice
        self.request_id = uuid.uuid4().hex
        self.stack = AsyncExitStack()
        self.stream: ResultStream[SpeechResult] | None = None
        self.media_type = ""  # set in start(), by the stream's encoder
        self.first: bytes = b""
        self._chunks: AsyncIterator[SpeechResult] | None = None
        self.audio_s = 0.0
        self.units: list[SsmlUnit] = []
        self.gaps = BreakGaps(0)
        self.timed = bool(body.timestamps)
        self.plan: list[PlannedWord] = []
        self._marks_s: dict[int, list[float]] = {}
        self.aligned = True
        """False once a unit comes back without marks (a voice with no alignment): no words at all."""
        self.words: list[WordTime] = []
        """Every word heard so far, in order."""
        self._words_taken = 0

    async def start(self, arrived_s: float) -> None:
        """Everything up to the first encoded audio (``arrived_s``: when the request arrived, perf_counter).
        Raises (after cleaning up) on any failure."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise
        self.state.metrics.first_audio_seconds.observe(time.perf_counter() - arrived_s)

    async def _start(self) -> None:
        registry = self.state.voices
        assert registry is not None
        registry.acquire(self.voice)
        self.stack.push_async_callback(self._release_voice)
        executors = self.state.executors
        first_marks: list[int] = []
        try:
            if self.timed:
                voice_text, units, first_ids, first_marks, self.plan = await executors.run(
                    "text",
                    prepare_timed,
                    self.body.input,
                    self.voice.config_path,
                    self.state.config.speech_clause_chars,
                )
            else:
                voice_text, units, first_ids = await executors.run(
                    "text", prepare, self.body.input, self.voice.config_path, self.state.config.speech_clause_chars
                )
        except SsmlError as exc:
            raise InvalidRequest(str(exc), param="input", code="invalid_ssml") from None
        except (ValueError, OSError) as exc:
            raise InvalidRequest(f"the voice '{self.voice.name}' cannot be used: {exc}", param="voice") from None
        if not units or not first_ids:
            raise InvalidRequest(
                "'input' has nothing to speak (no letters or digits)", param="input", code="empty_input"
            )
        # The stream's encoder lives in its encode worker process; only its media type comes back.
        self.media_type = await executors.run_encode(
            self.request_id, open_stream, self.body.response_format, voice_text.sample_rate, self.body.sample_rate
        )
        self.state.metrics.speech_encoders.inc()
        self.stack.push_async_callback(self._close_encoder)
        self.stream = await self.stack.enter_async_context(
            self.state.engine.speech(self.request_id, [len(u.text) for u in units])
        )
        self.units = units
        self.gaps = BreakGaps(voice_text.sample_rate)
        await self.state.engine.send(self._unit(0, len(units) == 1, first_ids, voice_text, first_marks))
        if len(units) > 1:
            feeder = asyncio.create_task(self._feed(units, voice_text), name=f"voxlane-speech-{self.request_id[:8]}")
            self.stack.push_async_callback(_cancel, feeder)
        self._chunks = self.stream.results(self.state.config.request_timeout_s)
        self.first = await self._next_encoded()  # errors before the first byte become real responses

    def _unit(
        self, index: int, last: bool, ids: list[int], voice_text: VoiceConfig, marks: list[int] | None = None
    ) -> SpeechUnit:
        return SpeechUnit(
            request_id=self.request_id,
            index=index,
            last=last,
            model_path=self.voice.model_path,
            config_path=self.voice.config_path,
            phoneme_ids=ids,
            length_scale=voice_text.length_scale / self.body.speed / self.units[index].rate,
            noise_scale=voice_text.noise_scale,
            noise_w_scale=voice_text.noise_w_scale,
            speaker_id=0 if voice_text.num_speakers > 1 else None,
            marks=marks or [],
        )

    async def _feed(self, units: list[SsmlUnit], voice_text: VoiceConfig) -> None:
        assert self.stream is not None
        try:
            for index in range(1, len(units)):
                marks: list[int] = []
                if self.timed:
                    ids, token_marks = await self.state.executors.run("text", unit_ids_marked, units[index], voice_text)
                    marks = token_marks.marks
                else:
                    ids = await self.state.executors.run("text", unit_ids, units[index], voice_text)
                if not ids:  # nothing speakable (punctuation only): a pause-sized unit keeps the indices whole
                    ids = await self.state.executors.run("text", pause_ids, voice_text)
                await self.state.engine.send(self._unit(index, index == len(units) - 1, ids, voice_text, marks))
        except VoxlaneError as exc:
            self.stream.fail(exc)
        except Exception:
            log.exception("preparing speech units failed")
            self.stream.fail(VoxlaneError("the server failed to prepare the text"))

    async def _next_encoded(self) -> bytes:
        """Encoded bytes of the next unit(s); b'' at the end (after the encoder's tail)."""
        assert self._chunks is not None
        async for msg, pcm in self._chunks:
            if msg.error:
                raise VoxlaneError(f"speech synthesis failed on unit {msg.index}: {msg.error}")
            pause_s = self.units[msg.index].pause_after_s if msg.index < len(self.units) else 0.0
            pcm = self.gaps.feed(pcm, pause_s)  # SSML's breaks and paragraphs (audio/gaps.py)
            if self.timed:  # where the unit's first sample sits in the stream, its quiet start cut or padded
                self._heard(msg.index, msg.marks, msg.sample_rate, self.gaps.unit_start / msg.sample_rate)
            self.audio_s += len(pcm) / msg.sample_rate
            data = await self.state.executors.run_encode(self.request_id, encode_stream, pcm)
            if data:
                return data
        tail, data = self.gaps.finish(), b""
        if len(tail):  # a break after the last unit
            self.audio_s += len(tail) / self.gaps.sample_rate
            data = await self.state.executors.run_encode(self.request_id, encode_stream, tail)
        return data + await self.state.executors.run_encode(self.request_id, finish_stream)

    def _heard(self, index: int, marks: list[int] | None, sample_rate: int, start_s: float) -> None:
        """Unit ``index`` starts ``start_s`` into the stream: its marks in seconds, and the words now complete."""
        if marks is None:
            self.aligned = False
        if not self.aligned:
            return
        self._marks_s[index] = unit_marks_s(start_s, marks or [], sample_rate)
        self.words += word_times(self.plan, len(self.words), self._marks_s)

    def take_words(self) -> list[WordTime]:
        """The words heard since the last call."""
        words = self.words[self._words_taken :]
        self._words_taken = len(self.words)
        return words

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            if self.first:
                yield self.first
            while True:
                data = await self._next_encoded()
                if not data:
                    break
                yield data
            self.state.metrics.speech_seconds.inc(self.audio_s)
            self.state.metrics.speech_streams.inc()
        finally:
            await self.close()

    async def close(self) -> None:
        """Undo everything ``start`` did, however the stream ends. A client that hangs up cancels the response's
        task, and anyio cancels every later await in it too: unshielded, the encoder's ``close_stream`` job
        would never start and its worker process would keep the encoder for good (the soak saw one leak per
        dropped stream, ~1.5 MiB a minute)."""
        with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            await self.stack.aclose()

    async def _close_encoder(self) -> None:
        await self.state.executors.run_encode(self.request_id, close_stream)
        self.state.metrics.speech_encoders.dec()

    async def _release_voice(self) -> None:
        assert self.state.voices is not None
        stale = self.state.voices.release(self.voice)
        if stale is not None:
            await self.state.executors.run("files", remove_dir, stale)


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _audio(job: _SpeechJob) -> AsyncIterator[bytes]:
    try:
        async for data in job.chunks():
            yield data
    except VoxlaneError as exc:
        job.state.metrics.stream_errors.inc()
        log.warning("speech stream %s ended early: %s", job.request_id, exc.message)
        raise  # the connection is cut, so the client sees a truncated body, not a complete one


def _speech_words(words: list[WordTime]) -> list[SpeechWord]:
    return [SpeechWord(word=w.word, start=w.start_s, end=w.end_s) for w in words]


async def _sse_audio(job: _SpeechJob) -> AsyncGenerator[dict[str, Any], None]:
    async for data in job.chunks():
        words = _speech_words(job.take_words()) if job.timed else None
        yield SpeechAudioDelta(audio=base64.b64encode(data).decode("ascii"), words=words).model_dump(exclude_none=True)
    usage = SpeechUsage(input_tokens=len(job.body.input), output_tokens=0, total_tokens=len(job.body.input))
    words = _speech_words(job.words) if job.timed else None
    yield SpeechAudioDone(usage=usage, words=words).model_dump(exclude_none=True)


@router.post("/dev/captioned_speech", include_in_schema=False)
async def create_captioned_speech(body: CaptionedSpeechRequest, request: Request) -> Response:
    """Kokoro-FastAPI's captioned speech, for clients written against it: audio with each word's
    ``start_time`` and ``end_time`` (seconds), as ``/v1/audio/speech`` with ``timestamps=["word"]`` has them.
    Left out of the OpenAPI schema: its streamed form is JSON lines under ``application/json``, as Kokoro
    sends it, which no OpenAPI response schema describes."""
    arrived_s = time.perf_counter()
    state = get_state(request)
    speech = SpeechRequest(
        model=SPEECH_MODEL if body.model == "kokoro" else body.model,  # Kokoro's clients name their model so
        input=body.input,
        voice=body.voice,
        response_format=body.response_format,
        speed=body.speed,
        stream_format="sse",
        timestamps=["word"] if body.return_timestamps else None,
    )
    _validate(speech, state)
    voice = await _voice(state, speech.voice)
    state.engine.check_alive()
    state.engine.check_speech(len(speech.input))
    job = _SpeechJob(state, speech, voice)
    await job.start(arrived_s)
    if body.stream:
        return StreamingResponse(_captioned_lines(job), media_type="application/json")
    audio = bytearray()
    try:
        async for data in job.chunks():
            audio += data
    except VoxlaneError:
        state.metrics.stream_errors.inc()
        raise
    return JSONResponse(_captioned(job, bytes(audio), job.words).model_dump())


def _captioned(job: _SpeechJob, audio: bytes, words: list[WordTime]) -> CaptionedSpeechResponse:
    timestamps = [WordTimestamp(word=w.word, start_time=w.start_s, end_time=w.end_s) for w in words]
    return CaptionedSpeechResponse(
        audio=base64.b64encode(audio).decode("ascii"),
        audio_format=job.media_type,
        timestamps=timestamps if job.timed else None,
    )


async def _captioned_lines(job: _SpeechJob) -> AsyncIterator[bytes]:
    async for data in _audio(job):
        payload = _captioned(job, data, job.take_words()).model_dump()
        yield (json.dumps(payload, separators=(",", ":")) + "\n").encode()
