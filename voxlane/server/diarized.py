"""``response_format=diarized_json`` (and ``rttm``): who said what. The route's side of diarization: the
form's rules (400s), the known speakers' clips, the speaker-count hints, and the answer's shape. The engine
embeds the speech regions (``SpeakerWindow``); the clustering and the words' speakers are pure functions
(voxlane/speakers/diarize.py) run here on the audio pool, never on the event loop."""

from __future__ import annotations

import asyncio
import bisect
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxlane.errors import InvalidRequest, VoxlaneError
from voxlane.messages import Segment, SpeakerResult, SpeakerWindow
from voxlane.protocol import (
    DIARIZED_FORMATS,
    MAX_KNOWN_SPEAKERS,
    SPEAKER_COUNT_FIELDS,
    DiarizedSegment,
    DiarizedTranscription,
    Task,
    TranscriptionRequest,
    Usage,
)
from voxlane.server.formats import join_text
from voxlane.server.state import AppState
from voxlane.speakers.diarize import (
    CHECK_DIFFERENT,
    CHECK_SAME,
    MIN_TURN_S,
    SPLIT_REGIONS_DIFFERENT,
    Region,
    SpeakerCount,
    SpeakerSegment,
    TimedWord,
    count_candidate,
    diarize,
    first_clusters,
    merge_candidates,
    merge_speakers,
    segments_of,
    sounds_apart,
    split,
    split_candidates,
    unsure,
)
from voxlane.speakers.features import SAMPLE_RATE, stretch_features
from voxlane.speakers.references import reference_features


@dataclass
class Reference:
    name: str
    mel: np.ndarray
    regions: list[tuple[int, int]]


@dataclass
class Diarization:
    """One diarized request's speaker side: its references, then what the engine sent back."""

    references: list[Reference]
    count: SpeakerCount = field(default_factory=SpeakerCount)
    """The request's bounds on the speaker count."""
    window_offsets_s: list[float] = field(default_factory=list)
    results: list[SpeakerResult] = field(default_factory=list)
    """In index order: the windows', then the references'."""
    edges: list[list[tuple[int, int]]] = field(default_factory=list)
    """Each window's speech regions (the ones embedded) cut to their speech (features.py ``speech_edges``), in
    frames of that window: the times the words and segments are placed by."""
    sources: list[np.ndarray | tuple[str, int, int]] = field(default_factory=list)
    """With the count check: each window's int16 samples, or (block, first sample, count) in the request's
    block of shared memory, kept until the speakers are known (the audio the request already holds)."""

    def samples(self, region: Region) -> np.ndarray | tuple[str, int, int]:
        """The samples of ``region`` (within one window): a view of its window's, or their place in the block."""
        w = bisect.bisect_right(self.window_offsets_s, region.start + 1e-6) - 1
        offset, source = self.window_offsets_s[w], self.sources[w]
        a = round((region.start - offset) * SAMPLE_RATE)
        b = round((region.end - offset) * SAMPLE_RATE)
        if isinstance(source, tuple):
            name, first, count = source
            a, b = min(a, count), min(b, count)
            return (name, first + a, b - a)
        return source[a:b]


def check(state: AppState, task: Task, params: TranscriptionRequest) -> None:
    """The 400s of a diarized request, before its audio is decoded."""
    names, refs = params.known_speaker_names, params.known_speaker_references
    fmt = params.response_format
    if fmt not in DIARIZED_FORMATS:
        if names or refs:
            raise InvalidRequest(
                "known_speaker_names[] and known_speaker_references[] name the speakers of "
                "response_format='diarized_json' (or 'rttm'); send that format with them, or leave them out",
                param="known_speaker_names" if names else "known_speaker_references",
            )
        return
    if task == "translate":
        raise InvalidRequest(
            f"{fmt} is for /v1/audio/transcriptions; translations have no speakers: send response_format "
            "'json', 'text', 'verbose_json', 'srt' or 'vtt'",
            param="response_format",
        )
    problem = state.engine.diarize_problem
    if problem is not None:
        raise InvalidRequest(
            f"this server cannot diarize: {problem}; or send another response_format",
            param="response_format",
            code="diarization_unavailable",
        )
    if params.timestamp_granularities or params.include:
        raise InvalidRequest(
            f"{fmt} takes no timestamp_granularities or include[]: its segments carry their times and "
            "speakers; use response_format='verbose_json' for words, 'json' for logprobs",
            param="timestamp_granularities" if params.timestamp_granularities else "include",
        )
    if len(names) != len(refs):
        raise InvalidRequest(
            f"known_speaker_names[] has {len(names)} item(s) and known_speaker_references[] {len(refs)}: send one "
            "reference clip (a data URL) for each name, in the same order",
            param="known_speaker_references" if len(names) > len(refs) else "known_speaker_names",
        )
    if len(names) > MAX_KNOWN_SPEAKERS:
        raise InvalidRequest(
            f"{len(names)} known speakers were sent; send at most {MAX_KNOWN_SPEAKERS} names and references",
            param="known_speaker_names",
        )
    clean = [n.strip() for n in names]
    if any(not n for n in clean) or len(set(clean)) != len(clean):
        raise InvalidRequest(
            "known_speaker_names[] must be distinct, non-empty names (such as 'agent' and 'customer')",
            param="known_speaker_names",
        )
    _check_counts(state.config.diarize_max_speakers, params)


def _check_counts(limit: int, params: TranscriptionRequest) -> None:
    """The speaker-count hints against the server's limit and the known speakers (the form checked the rest:
    integers >= 1, min <= max, num within them)."""
    for name in SPEAKER_COUNT_FIELDS:
        value = getattr(params, name)
        if value is not None and value > limit:
            raise InvalidRequest(
                f"{name}={value} is over this server's limit of {limit} speakers (--diarize-max-speakers); send "
                f"at most {limit}",
                param=name,
            )
    known = len(params.known_speaker_names)
    most = params.num_speakers or params.max_speakers
    if most is not None and known > most:
        raise InvalidRequest(
            f"{known} known speakers were sent, but {'num' if params.num_speakers else 'max'}_speakers is {most}: "
            f"send at most {most} known speakers, or a count that holds them",
            param="num_speakers" if params.num_speakers else "max_speakers",
        )


def speaker_count(params: TranscriptionRequest) -> SpeakerCount:
    """The request's bounds on the speaker count; num_speakers is both, as in pyannote."""
    if params.num_speakers is not None:
        return SpeakerCount(params.num_speakers, params.num_speakers)
    return SpeakerCount(params.min_speakers or 1, params.max_speakers)


async def references(state: AppState, params: TranscriptionRequest) -> list[Reference]:
    """Decode the known speakers' clips on the audio pool (400 for a bad one)."""
    jobs = [
        state.executors.run("audio", reference_features, url, i, state.engine.speaker_fbank)
        for i, url in enumerate(params.known_speaker_references)
    ]
    done = await asyncio.gather(*jobs)
    return [Reference(name.strip(), mel, regions) for name, (mel, regions) in zip(params.known_speaker_names, done)]


def _inputs(
    diarization: Diarization, segments: list[Segment]
) -> tuple[list[TimedWord], list[Region], np.ndarray, np.ndarray, list[tuple[str, np.ndarray]]]:
    words = [
        TimedWord(w.word, w.start, w.end, i) for i, s in enumerate(segments) for w in (s.words or []) if w.word.strip()
    ]
    n_windows = len(diarization.window_offsets_s)
    regions: list[Region] = []
    vectors: list[np.ndarray] = []
    weights: list[int] = []
    for index in range(n_windows):
        result = diarization.results[index]
        offset = diarization.window_offsets_s[index]
        regions += [Region(offset + a / 100, offset + b / 100) for a, b in diarization.edges[index]]
        vectors.append(result.array())
        weights += result.partials
    refs = []
    for k, ref in enumerate(diarization.references):
        result = diarization.results[n_windows + k]
        if len(result.partials):
            refs.append((ref.name, result.array()[0]))
    embeddings = np.concatenate(vectors) if vectors else np.zeros((0, 256), dtype=np.float32)
    return words, regions, embeddings, np.array(weights, dtype=np.float64), refs


async def speaker_segments(state: AppState, diarization: Diarization, segments: list[Segment]) -> list[SpeakerSegment]:
    """The transcript's words, clustered by speaker and named, on the audio pool. With the count check, the
    engine's check encoder hears (:func:`_hear`) each speaker with little speech against its nearest ones
    (merged where it sounds the same), each speaker the count step would add, and each speaker whose halves
    are unlike (split where they are two voices)."""
    words, regions, embeddings, weights, refs = _inputs(diarization, segments)
    config = state.config
    run = state.executors.run
    threshold, merge = config.diarize_threshold, config.diarize_merge_threshold
    if not diarization.sources:
        return await run(
            "audio",
            diarize,
            words,
            regions,
            embeddings,
            weights,
            refs,
            threshold,
            merge,
            config.diarize_known_threshold,
            MIN_TURN_S,
            diarization.count,
        )
    count = diarization.count
    _, centroids = await run("audio", first_clusters, embeddings, threshold, merge, weights, count)
    heard: dict[tuple[Region, ...], np.ndarray] = {}  # a stretch is often heard again after a change

    async def cosine(a: list[Region], b: list[Region]) -> float:
        vectors = await _hear(state, diarization, heard, [a, b])
        return float(vectors[tuple(a)] @ vectors[tuple(b)])

    while len(centroids) > max(1, count.low):
        into = None
        for m in await run("audio", merge_candidates, embeddings, regions, centroids, weights):
            for j, stretch in m.nearest:  # nearest first: a stray part's voice is most often the nearest
                if await cosine(m.stretch, stretch) >= CHECK_SAME:
                    into = (m.speaker, j)
                    break
            state.metrics.speaker_checks.labels("merge", "speaker" if into is None else "same").inc()
            if into is not None:
                break
        if into is None:
            break
        centroids = await run("audio", merge_speakers, embeddings, centroids, *into)
    while count.high is None or len(centroids) < count.high:
        candidate = await run("audio", count_candidate, embeddings, regions, threshold, merge, weights, centroids)
        if candidate is None:
            break
        added = True
        for stretch in candidate.nearest:  # stops at the first that sounds the same
            if await cosine(candidate.stretch, stretch) >= CHECK_DIFFERENT:
                added = False
                break
        state.metrics.speaker_checks.labels("add", "speaker" if added else "same").inc()
        if not added:
            break
        centroids = candidate.centroids
    room = len(regions) if count.high is None else count.high - len(centroids)
    if room > 0:
        splits = await run("audio", split_candidates, embeddings, regions, threshold, merge, weights, centroids)
        await _hear(state, diarization, heard, [s for c in splits for s in c.stretches])  # one message for all
        apart = [await cosine(*c.stretches) for c in splits]
        to_hear = [c for c, cos in zip(splits, apart) if unsure(cos)]
        await _hear(state, diarization, heard, [[regions[i]] for c in to_hear for i in c.members])
        kept = []
        for c, cos in zip(splits, apart):
            two = cos < CHECK_DIFFERENT
            if unsure(cos):
                members = [heard[(regions[i],)] for i in c.members]
                ends = (heard[tuple(c.stretches[0])], heard[tuple(c.stretches[1])])
                two = await run("audio", sounds_apart, c, members, ends, regions) < SPLIT_REGIONS_DIFFERENT
                state.metrics.speaker_checks.labels("regions", "speaker" if two else "same").inc()
            state.metrics.speaker_checks.labels("split", "speaker" if two else "same").inc()
            if two:
                kept.append(c)
        centroids = split(centroids, kept[:room])
    return await run(
        "audio", segments_of, words, regions, embeddings, centroids, refs, config.diarize_known_threshold, MIN_TURN_S
    )


async def _hear(
    state: AppState,
    diarization: Diarization,
    heard: dict[tuple[Region, ...], np.ndarray],
    stretches: list[list[Region]],
) -> dict[tuple[Region, ...], np.ndarray]:
    """``heard`` with each of ``stretches`` embedded whole by the engine's check encoder: those not heard
    yet, their samples joined and their features computed on the audio pool, in one message."""
    todo = list(dict.fromkeys(tuple(s) for s in stretches if tuple(s) not in heard))
    if not todo:
        return heard
    pieces = [[diarization.samples(r) for r in stretch] for stretch in todo]
    features, spans = await state.executors.run("audio", stretch_features, pieces, not state.engine.check_fbank)
    engine = state.engine
    async with engine.speakers(uuid.uuid4().hex + "-check", 1) as stream:
        await engine.send(SpeakerWindow(stream.request_id, 0, 1, len(features), spans, check=True), features)
        async for result in stream.results(state.config.request_timeout_s):
            if result.error:
                raise VoxlaneError(f"diarization failed: {result.error}")
            heard.update(zip(todo, result.array()))
            return heard
    raise VoxlaneError("diarization failed: the engine sent no speaker count check")


def segment_events(parts: list[SpeakerSegment]) -> list[dict[str, Any]]:
    return [_segment(i, p).model_dump() for i, p in enumerate(parts)]


def _segment(i: int, p: SpeakerSegment) -> DiarizedSegment:
    return DiarizedSegment(id=f"seg_{i}", start=round(p.start, 3), end=round(p.end, 3), text=p.text, speaker=p.speaker)


def render(segments: list[Segment], parts: list[SpeakerSegment], duration_s: float) -> dict[str, Any]:
    body = DiarizedTranscription(
        duration=round(duration_s, 3),
        text=join_text(segments),
        segments=[_segment(i, p) for i, p in enumerate(parts)],
        usage=Usage(seconds=math.ceil(duration_s)),
    )
    return body.model_dump()
