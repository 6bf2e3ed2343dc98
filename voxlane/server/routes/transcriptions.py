"""POST /v1/audio/transcriptions and /v1/audio/translations.

Path of a request: admission (429 at once when the server has too many requests or its queue is full)
-> read and check the form (event loop, cheap; transcription_form.py) -> decode + split on the audio pool
(int16; silent windows dropped; 429 as soon as the audio with sound passes the queue's room) -> queue room
for its windows (429 if none) -> per window: log-mel on the audio pool, then send to the engine -> results
in window order -> render. Feature computation of later windows overlaps the engine's work on earlier ones;
a window's samples are let go once its features are sent. A client that goes away aborts the request's
windows in the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.datastructures import UploadFile

from voxlane.audio import shared
from voxlane.audio.pipeline import (
    AudioWindow,
    OverBudget,
    Speech,
    SplitAudio,
    SplitSteps,
    decode_and_split,
    window_features,
)
from voxlane.audio.vad import VadOptions
from voxlane.engine.client import ResultStream
from voxlane.errors import ClientGone, VoxlaneError
from voxlane.languages import language_name
from voxlane.messages import Segment, SpeakerResult, SpeakerWindow, TranscribeOptions, WindowRequest, WindowResult
from voxlane.models import WhisperModel
from voxlane.protocol import (
    DIARIZED_FORMATS,
    DiarizedSegment,
    DiarizedTranscription,
    Logprob,
    Task,
    TokenUsage,
    TokenUsageDetails,
    Transcription,
    TranscriptionRequest,
    TranscriptionSegment,
    TranscriptionWord,
    TranscriptTextDelta,
    TranscriptTextDone,
    Usage,
    VerboseTranscription,
    error_responses,
    sse_content,
)
from voxlane.server import diarized
from voxlane.server.diarized import Diarization
from voxlane.server.formats import join_text, to_srt, to_vtt, token_logprobs
from voxlane.server.routes.transcription_form import OPENAPI_BODY, TranscriptionForm
from voxlane.server.sse import event_stream
from voxlane.server.state import AppState, get_state
from voxlane.speakers.features import SpeakerWindowFeatures, window_all_features
from voxlane.speakers.rttm import rttm_file_id, to_rttm

log = logging.getLogger(__name__)
router = APIRouter()

_TEXT = {"schema": {"type": "string"}}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The transcript, in the shape that response_format (and stream) asks for.",
        "content": {
            "text/plain": {**_TEXT, "example": "Hello there.\n"},  # text, srt, rttm
            "text/vtt": _TEXT,
            "text/event-stream": sse_content(TranscriptTextDelta, TranscriptTextDone, DiarizedSegment),
        },
    },
    **error_responses(400, 404, 413, 503),
}
_ROUTE: dict[str, Any] = {
    "response_model": Transcription | VerboseTranscription | DiarizedTranscription,
    "responses": _RESPONSES,
    "openapi_extra": OPENAPI_BODY,
}


@router.post("/v1/audio/transcriptions", **_ROUTE)
async def create_transcription(request: Request) -> Response:
    return await _handle(request, "transcribe")


@router.post("/v1/audio/translations", **_ROUTE)
async def create_translation(request: Request) -> Response:
    return await _handle(request, "translate")


async def _handle(request: Request, task: Task) -> Response:
    arrived_s = time.perf_counter()
    state = get_state(request)
    with state.engine.transcription():  # 429 before the upload is read when the server is full
        return await _transcribe(request, state, task, arrived_s)


async def _transcribe(request: Request, state: AppState, task: Task, arrived_s: float) -> Response:
    form = await TranscriptionForm.read(request, state, task)
    params = form.params
    diarization = None
    if params.response_format in DIARIZED_FORMATS:
        diarization = Diarization(await diarized.references(state, params), diarized.speaker_count(params))
    # The engine loads the model (when it must) while the audio decodes; a 503 when it takes too long.
    loading = asyncio.ensure_future(state.whisper_model(params.model))
    loading.add_done_callback(lambda t: t.cancelled() or t.exception())  # read when the decode failed first
    try:
        audio = await _decode(state, form.upload, form.vad)
        await loading
    except OverBudget as exc:
        raise state.engine.audio_full(exc.kept_s) from None
    finally:
        loading.cancel()
    options = TranscribeOptions(
        task=task,
        language=params.language,
        prompt=with_keywords(params.prompt, params.keywords),
        temperature=params.temperature,
        word_timestamps="word" in params.timestamp_granularities or diarization is not None,
        logprobs="logprobs" in params.include,
        timestamps=state.config.decode_timestamps == "always" or params.response_format not in ("json", "text"),
    )
    job = _Job(state, audio, options, arrived_s, form.model, diarization)
    if params.stream:
        if job.windows:  # the stream's queue room is taken when it starts: answer a full queue now
            state.engine.check_alive()
            state.engine.check_windows([w.duration_s for w in job.windows])
        events = _segment_events(job) if diarization is not None else _deltas(job)
        return event_stream(events, state.metrics, "transcription stream")
    segments, language = await _cancel_on_disconnect(request, job.collect())
    state.metrics.audio_seconds.inc(audio.duration_s)
    if diarization is not None:
        try:
            parts = await diarized.speaker_segments(state, diarization, segments)
        finally:
            job.release_samples()
        if params.response_format == "rttm":
            turns = ((p.start, p.end, p.speaker) for p in parts)
            return PlainTextResponse(to_rttm(rttm_file_id(form.upload.filename), turns))
        return JSONResponse(diarized.render(segments, parts, audio.duration_s))
    return _render(params, task, segments, language, audio.duration_s)


async def _decode(state: AppState, upload: UploadFile, vad: VadOptions | None) -> SplitAudio:
    """Decode and split on the audio pool. The budget is the engine queue's room: the decode stops with
    OverBudget as soon as the audio with sound passes it. On a thread pool the decode goes in steps of
    STEP_S seconds of audio, each a job of its own, so that hours of audio take turns with the short jobs
    of other requests, and past the first step (long audio) at most ``audio workers - 1`` such decodes run
    at once; a process pool cannot hold a decoder between jobs, so there it is one job, and the upload and
    the windows' samples cross to and from it in shared memory (audio/shared.py): the upload goes from its
    spooled file to a block on a thread, never as one bytes object in this process."""
    config = state.config
    executors = state.executors
    if config.audio_preprocess_pool == "process" and executors.shared_audio:
        return await _decode_shared(state, upload, vad)
    data = await upload.read()
    if config.audio_preprocess_pool == "process":
        return await executors.run(
            "audio",
            decode_and_split,
            data,
            config.max_audio_duration_s,
            config.split_search_s,
            vad,
            state.engine.audio_room_s(),
        )
    steps = SplitSteps(data, config.max_audio_duration_s, config.split_search_s, vad)
    del data
    audio = await executors.run("audio", steps.step, state.engine.audio_room_s())
    if audio is not None:
        return audio
    async with state.engine.long_decodes:  # long audio: leave an audio worker to the others
        while audio is None:
            audio = await executors.run("audio", steps.step, state.engine.audio_room_s())
    return audio


async def _decode_shared(state: AppState, upload: UploadFile, vad: VadOptions | None) -> SplitAudio:
    config = state.config
    executors = state.executors
    name, pcm = shared.new_name(), shared.new_name()
    written = await executors.run("transfer", shared.copy_to_block, name, upload.file, upload.size or 0)
    transfers = state.metrics.audio_transfers
    transfers.labels("shared_memory" if written else "pipe").inc()
    try:
        split = await executors.run(
            "audio",
            shared.decode_and_split_shared,
            name if written else await upload.read(),
            pcm,
            config.max_audio_duration_s,
            config.split_search_s,
            vad,
            state.engine.audio_room_s(),
            on_abandon=partial(shared.unlink, name, pcm),
        )
    except BaseException:
        shared.unlink(name, pcm)  # the worker removes the upload's block once it has read it
        raise
    if split.windows:
        transfers.labels("pipe" if split.block is None else "shared_memory").inc()
    return split


_NO_SAMPLES = np.zeros(0, dtype=np.int16)


class _Job:
    """One request's trip through the audio pool and the engine."""

    def __init__(
        self,
        state: AppState,
        audio: SplitAudio,
        options: TranscribeOptions,
        arrived_s: float,
        model: WhisperModel,
        diarization: Diarization | None = None,
    ) -> None:
        self.state = state
        self.model = model
        """The Whisper model that decodes the windows: their mel bins, and their ``model`` for the engine."""
        self.diarization = diarization
        """A diarized request's speaker side: each window's regions are embedded in the engine too."""
        self.windows = audio.windows
        """The windows with sound; silent ones were dropped by the split and yield no text."""
        self.duration_s = audio.duration_s
        self.options = options
        self.arrived_s = arrived_s
        """When the request arrived (perf_counter), for the time to its first text."""
        self.block = audio.block
        """The block of shared memory that holds the windows' samples, or None (audio/shared.py)."""
        self._release_block = weakref.finalize(self, shared.unlink, audio.block) if audio.block else None
        """Removes the block when this job is gone before its last window's features were asked for (a
        request that ended early, or a stream never read); the worker of the last window removes it
        otherwise, unless the speaker count check reads it: then :meth:`release_samples` does."""
        self._keep_samples = diarization is not None and state.engine.count_check
        """A diarized request on an engine with the count check keeps its samples until its speakers are
        known (server/diarized.py): the stretches it checks are joined from them."""

    async def results(self) -> AsyncIterator[WindowResult]:
        if not self.windows:
            return  # silence: no text, and nothing for the engine to do
        engine = self.state.engine
        request_id = uuid.uuid4().hex
        metrics = self.state.metrics
        window_s = [w.duration_s for w in self.windows]
        diarization = self.diarization
        speakers_count = len(self.windows) + (len(diarization.references) if diarization else 0)
        async with contextlib.AsyncExitStack() as stack:
            req = await stack.enter_async_context(engine.request(request_id, window_s))
            spk = (
                await stack.enter_async_context(engine.speakers(request_id + "-spk", speakers_count))
                if diarization is not None
                else None
            )
            feeder = asyncio.create_task(self._feed(req, spk), name=f"voxlane-feed-{request_id[:8]}")
            queued_s = sum(window_s)
            metrics.queued_audio_seconds.inc(queued_s)
            try:
                async for result in req.results(self.state.config.request_timeout_s):
                    if result.error:
                        raise VoxlaneError(
                            f"transcription failed on the window at "
                            f"{self.windows[result.index].offset_s:.1f} s: "
                            f"{result.error}"
                        )
                    if result.index == 0:
                        metrics.first_text_seconds.observe(time.perf_counter() - self.arrived_s)
                    metrics.windows.inc()
                    metrics.windows_by_beam.labels(str(result.beam_size)).inc()
                    metrics.continuations.inc(result.passes - 1)
                    metrics.queued_audio_seconds.dec(window_s[result.index])
                    queued_s -= window_s[result.index]
                    yield result
                if spk is not None and diarization is not None:
                    diarization.results = await self._speaker_results(spk)
            finally:
                metrics.queued_audio_seconds.dec(queued_s)
                feeder.cancel()
                await asyncio.gather(feeder, return_exceptions=True)

    async def _speaker_results(self, spk: ResultStream[SpeakerResult]) -> list[SpeakerResult]:
        results = []
        async for result in spk.results(self.state.config.request_timeout_s):
            if result.error:
                raise VoxlaneError(f"diarization failed: {result.error}")
            results.append(result)
        return results

    async def _feed(self, req: ResultStream[WindowResult], spk: ResultStream[SpeakerResult] | None = None) -> None:
        engine = self.state.engine
        diarization = self.diarization
        try:
            if spk is not None and diarization is not None:
                for k, ref in enumerate(diarization.references):
                    index = len(self.windows) + k
                    ref_msg = SpeakerWindow(spk.request_id, index, spk.count, len(ref.mel), ref.regions)
                    await engine.send(ref_msg, ref.mel)
            speakers = spk is not None and diarization is not None
            for index, window in enumerate(self.windows):
                last = index == len(self.windows) - 1 and not self._keep_samples
                features, n_frames, speech, speaker_features = await self._features(window, last, speakers)
                if spk is not None and diarization is not None and speaker_features is not None:
                    await self._send_speaker_window(spk, diarization, index, window, speaker_features)
                window.pcm = _NO_SAMPLES  # its features go to the engine: the samples are not read again
                msg = WindowRequest(
                    req.request_id,
                    index,
                    req.count,
                    offset_s=window.offset_s,
                    duration_s=window.duration_s,
                    n_frames=n_frames,
                    n_mels=features.shape[0],
                    options=self.options,
                    speech=speech,
                    model="" if self.model.path == self.state.models.default.path else self.model.path,
                )
                await engine.send(msg, features)
        except VoxlaneError as exc:
            req.fail(exc)  # wakes the reader, which raises it
        except Exception:
            log.exception("preparing windows failed")
            req.fail(VoxlaneError("the server failed to prepare the audio windows"))

    async def _send_speaker_window(
        self,
        spk: ResultStream[SpeakerResult],
        diarization: Diarization,
        index: int,
        window: AudioWindow,
        speaker_features: SpeakerWindowFeatures,
    ) -> None:
        """The window's speaker features and speech regions to the engine's speaker encoder."""
        pcm = self._window_pcm(window)
        mel, regions, edges = speaker_features
        diarization.window_offsets_s.append(window.offset_s)
        diarization.edges.append(edges)
        if self._keep_samples:
            diarization.sources.append(pcm)
        await self.state.engine.send(SpeakerWindow(spk.request_id, index, spk.count, len(mel), regions), mel)

    def _window_pcm(self, window: AudioWindow) -> np.ndarray | tuple[str, int, int]:
        """The window's samples, or where they lie in the request's block of shared memory."""
        if self.block is not None and window.block_offset is not None:
            return (self.block, window.block_offset, window.end - window.start)
        return window.pcm

    async def _features(
        self, window: AudioWindow, last: bool, speakers: bool = False
    ) -> tuple[np.ndarray, int, Speech, SpeakerWindowFeatures | None]:
        """The window's log-mel features, frames with audio and speech, and with ``speakers`` its speaker
        features too (one job, one short-time transform), computed on the audio pool; with shared memory, read
        where the worker wrote them (no copy here: ZMQ sends from that mapping). The worker of the ``last``
        window removes the request's block of samples."""
        executors = self.state.executors
        n_mels = self.model.n_mels
        fbank = self.state.engine.speaker_fbank
        if not executors.shared_audio:
            if speakers:
                both = await executors.run(
                    "audio", window_all_features, window.pcm, n_mels, window.offset_s, window.speech, fbank
                )
                assert isinstance(both[0], np.ndarray)  # no block named: the features themselves
                return both[0], both[1], both[2], both[3]
            return (
                *await executors.run("audio", window_features, window.pcm, n_mels, window.offset_s, window.speech),
                None,
            )
        pcm = self._window_pcm(window)
        name = shared.new_name()
        speaker_features: SpeakerWindowFeatures | None = None
        try:
            if speakers:
                out, n_frames, speech, speaker_features = await executors.run(
                    "audio",
                    window_all_features,
                    pcm,
                    n_mels,
                    window.offset_s,
                    window.speech,
                    fbank,
                    name,
                    last,
                    on_abandon=partial(shared.unlink, name),
                )
            else:
                out, n_frames, speech = await executors.run(
                    "audio",
                    shared.window_features_shared,
                    pcm,
                    name,
                    n_mels,
                    window.offset_s,
                    window.speech,
                    last,
                    on_abandon=partial(shared.unlink, name),
                )
        except BaseException:
            shared.unlink(name)
            raise
        if last and self._release_block is not None:
            self._release_block.detach()  # the worker removed the block of samples
        features = shared.features_view(name, out) if isinstance(out, tuple) else out
        self.state.metrics.audio_transfers.labels("shared_memory" if isinstance(out, tuple) else "pipe").inc()
        return features, n_frames, speech, speaker_features

    def release_samples(self) -> None:
        """Drop the samples kept for the count check, once the speakers are known (or the request failed)."""
        if self.diarization is not None:
            self.diarization.sources = []
        if self._release_block is not None:
            self._release_block()

    async def collect(self) -> tuple[list[Segment], str]:
        segments: list[Segment] = []
        language = self.options.language or "en"
        async for result in self.results():
            segments.extend(result.segments)
            language = result.language
        return segments, language


async def _cancel_on_disconnect(request: Request, work: Any) -> Any:
    """Await ``work``; cancel it if the client disconnects first (its windows are then aborted)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                task.cancel()
                return

    watcher = asyncio.create_task(watch())
    try:
        return await task
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled():
            raise ClientGone() from None  # we cancelled the work because the client left
        raise
    finally:
        watcher.cancel()


async def _deltas(job: _Job) -> AsyncGenerator[dict[str, Any], None]:
    texts: list[str] = []
    logprobs: list[Logprob] | None = [] if job.options.logprobs else None
    output_tokens = 0
    async for result in job.results():
        for segment in result.segments:
            output_tokens += len(segment.tokens)
            if segment.text:
                texts.append(segment.text)
                delta = _logprobs([segment]) if logprobs is not None else None
                if logprobs is not None and delta:
                    logprobs += delta
                yield TranscriptTextDelta(delta=segment.text, logprobs=delta).model_dump()
    job.state.metrics.audio_seconds.inc(job.duration_s)
    audio_tokens = math.ceil(job.duration_s * AUDIO_TOKENS_PER_S)
    usage = TokenUsage(
        input_tokens=audio_tokens,
        output_tokens=output_tokens,
        total_tokens=audio_tokens + output_tokens,
        input_token_details=TokenUsageDetails(audio_tokens=audio_tokens, text_tokens=0),
    )
    yield TranscriptTextDone(text="".join(texts).strip(), logprobs=logprobs, usage=usage).model_dump()


async def _segment_events(job: _Job) -> AsyncGenerator[dict[str, Any], None]:
    """A diarized stream: a ``transcript.text.segment`` event for each speaker segment, then
    ``transcript.text.done``. Speakers are clustered over the whole audio, so the segments come once the last
    window is transcribed (docs/diarization.md)."""
    assert job.diarization is not None
    try:
        segments, _ = await job.collect()
        parts = await diarized.speaker_segments(job.state, job.diarization, segments)
    finally:
        job.release_samples()
    for event in diarized.segment_events(parts):
        yield event
    job.state.metrics.audio_seconds.inc(job.duration_s)
    done = TranscriptTextDone(text=join_text(segments), usage=Usage(seconds=math.ceil(job.duration_s)))
    yield done.model_dump(exclude={"logprobs"})


def _logprobs(segments: list[Segment]) -> list[Logprob]:
    return [Logprob.model_validate(t) for t in token_logprobs(segments)]


AUDIO_TOKENS_PER_S = 50
"""Whisper's encoder positions per second of audio (1,500 per 30 s window): the stream's audio tokens."""


def with_keywords(prompt: str | None, keywords: list[str]) -> str | None:
    """The decoder's prompt for a request with ``keywords``: the words, then the request's prompt."""
    words = [k.strip() for k in keywords if k.strip()]
    if not words:
        return prompt
    listed = ", ".join(words) + "."
    return f"{listed} {prompt}" if prompt else listed


def _render(
    params: TranscriptionRequest, task: Task, segments: list[Segment], language: str, duration_s: float
) -> Response:
    text = join_text(segments)
    usage = Usage(seconds=math.ceil(duration_s))
    fmt = params.response_format
    if fmt == "text":
        return PlainTextResponse(text + "\n" if text else "")
    if fmt == "srt":
        return PlainTextResponse(to_srt(segments))
    if fmt == "vtt":
        return PlainTextResponse(to_vtt(segments), media_type="text/vtt")
    if fmt == "json":
        logprobs = _logprobs(segments) if "logprobs" in params.include else None
        return JSONResponse(Transcription(text=text, logprobs=logprobs, usage=usage).model_dump(exclude_none=True))
    granularities = params.timestamp_granularities or ["segment"]
    body = VerboseTranscription(
        task=task,
        language=language_name(language),
        duration=round(duration_s, 3),
        text=text,
        usage=usage,
        segments=[
            TranscriptionSegment(
                id=i,
                seek=int(round(s.start * 100)),
                start=s.start,
                end=s.end,
                text=s.text,
                tokens=s.tokens,
                temperature=s.temperature,
                avg_logprob=s.avg_logprob,
                compression_ratio=s.compression_ratio,
                no_speech_prob=s.no_speech_prob,
                beam_size=s.beam_size,
            )
            for i, s in enumerate(segments)
        ]
        if "segment" in granularities
        else None,
        words=[
            TranscriptionWord(word=w.word.strip(), start=w.start, end=w.end) for s in segments for w in (s.words or [])
        ]
        if "word" in granularities
        else None,
    )
    return JSONResponse(body.model_dump(exclude_none=True))
