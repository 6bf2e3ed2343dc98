"""One decode pass of a window shaped into segments, and where a continuation of it should start.

A greedy decode often stops before its window's audio does: it ends on a segment it never closed, or it
closes its last segment and says end-of-text while seconds of speech remain, and the words there were lost.
Like faster-whisper's ``seek``, the runner then hands back the time of the last timestamp it trusts
(``WindowOutput.resume_s``), and the engine decodes the rest of the window as a continuation pass.
faster-whisper trusts a closed last segment and moves on; voxlane also continues after one when voice
activity detection finds speech in the rest of the window, and, where words are aligned, from the last word
before speech that its words skip (``cut_at_skipped_speech``).
"""

from __future__ import annotations

from dataclasses import dataclass

from faster_whisper.tokenizer import Tokenizer

from voxlane.messages import Segment, WindowRequest, Word
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper_decode import NO_SPEECH_THRESHOLD, Decoded

TIME_PRECISION_S = 0.02  # one timestamp token
SHORT_TAIL_S = 0.3
"""A short window's segments that start this close to the end of its audio, or later, are dropped: what
Whisper reads in the silence after the audio (a repeat of the last sentence), as for live partials."""
NO_SPEECH_WITHOUT_VAD_SPEECH = 0.3
"""No-speech probability above which a window where VAD found no speech yields nothing."""
MAX_PASSES = 4
"""Decodes of one window at most: the first and up to three continuations (each starts later)."""
MIN_RESUME_S = 1.0
"""A decode that closed its last segment is continued only when at least this much audio is left after it
(and VAD finds speech in it): a closing timestamp a few frames early is normal."""
MIN_PROGRESS_S = 0.5
"""A continuation starts at least this far into its window, so every pass moves on."""
MIN_SPEECH_AFTER_S = 1.0
"""Speech (the window's loud frames by energy, or what Silero found, padded by 0.3 s on each side: see
audio/vad.window_speech) after the last closed segment that makes a continuation worth its cost. On the
dev set the continuations that found lost sentences had 2.1-5.3 s of it by energy (2.5-4.3 s by Silero);
those that found nothing, or "Thank you.", 0-0.54 s (0-0.53 s)."""
MIN_SKIPPED_SPEECH_S = 2.0
"""Speech (as for MIN_SPEECH_AFTER_S) between two words, 1 s or more apart, that the decode is taken to have
skipped. A single short sound reads as its length plus 0.6 s of padding: at 1 s, 15 cuts on the dev set
and the hard diarization set held 1.0-1.23 s, and re-read a word at most (the dev set's 6 changed no word);
the two that read lost turns held 2.2 and 8.2 s."""


def pass_segments(
    work: WindowPass, tok: Tokenizer, decoded: Decoded, short: bool
) -> tuple[list[Segment], float | None]:
    """This pass's segments, and where a continuation should start (seconds into the window) or None.
    ``short``: the window was encoded short (``is_short``), so segments read in its pad are dropped."""
    if decoded.is_silence or decoded.no_speech_prob > no_speech_threshold(work):
        return [], None
    offset, duration = work.msg.offset_s, work.msg.duration_s
    ts_begin = tok.timestamp_begin
    tokens = decoded.tokens
    # Cut at each pair of consecutive timestamp tokens (end of one segment, start of the next).
    pieces: list[tuple[float, float, list[int]]] = []
    start_i = 0
    last_time = 0.0
    for i in range(1, len(tokens)):
        if tokens[i] >= ts_begin and tokens[i - 1] >= ts_begin:
            piece = tokens[start_i:i]
            pieces.append(_piece(piece, ts_begin, last_time))
            last_time = pieces[-1][1]
            start_i = i
    tail = tokens[start_i:]
    resume_s = None
    if any(t < ts_begin for t in tail) or not pieces:
        stamps = [t for t in tail if t >= ts_begin]
        closed = len(stamps) >= 2 and tail[-1] >= ts_begin
        if pieces and not closed and may_continue(work, last_time):
            # The decode stopped inside a segment it never closed: decode again from the end of the last
            # closed one, and drop the unfinished text (the continuation reads those words again).
            resume_s = last_time
        else:
            # Text after the last closed segment (or no timestamps at all): it runs to its last
            # timestamp, or to the window's end.
            start, end, body = _piece(tail, ts_begin, last_time)
            if len(stamps) < 2:
                end = duration
            pieces.append((start, end, body))
    if short:
        pieces = [p for p in pieces if p[0] < duration - SHORT_TAIL_S]
    segments = []
    for start, end, body in pieces:
        text_tokens = [t for t in body if t < tok.eot]
        if not text_tokens:
            continue
        start = min(max(start, 0.0), duration)
        end = min(max(end, start), duration)
        text = tok.decode(text_tokens)
        if not any(c.isalnum() for c in text):
            continue  # ". . . ." over quiet noise: Whisper's filler for "nothing here"
        segments.append(
            Segment(
                start=round(offset + start, 3),
                end=round(offset + end, 3),
                text=text,
                tokens=text_tokens,
                avg_logprob=decoded.avg_logprob,
                compression_ratio=decoded.compression_ratio,
                no_speech_prob=decoded.no_speech_prob,
                temperature=decoded.temperature,
                beam_size=decoded.beam_size,
            )
        )
    if resume_s is None and segments:
        # Every segment closed, but the decode said end-of-text early: continue if speech is left.
        end_s = segments[-1].end - offset
        if duration - end_s >= MIN_RESUME_S and may_continue(work, end_s) and speech_after(work.msg, end_s):
            resume_s = end_s
    return segments, resume_s


@dataclass(frozen=True)
class PlacedWord:
    """A window's word as handed out to its segment."""

    segment: int
    """The segment's index in the window's segments."""
    count: int
    """The segment's words up to and including this one."""
    tokens: int
    """The segment's tokens up to and including this word's."""
    word: Word


def cut_at_skipped_speech(work: WindowPass, segments: list[Segment], placed: list[PlacedWord]) -> float | None:
    """Where the window's words skip speech: the end of the first word (seconds into the window) after which
    the next word, or for the last word the end of its segment, comes MIN_RESUME_S or more later with at
    least MIN_SKIPPED_SPEECH_S of speech between; None where none does, or voice activity detection did
    not run.

    ``segments`` are cut there in place: the words after it and the segments after them are dropped, and the
    continuation reads them again. A segment's own times hide such a skip: in a six-speaker conversation
    tiny.en read one segment from 0.0 s to 20.1 s of its window whose six words end at 3.6 s, and said
    end-of-text; the continuation after the segment started at 20.1 s, and one speaker's three turns
    between were lost."""
    offset = work.msg.offset_s
    for i, before in enumerate(placed):
        end_s = before.word.end - offset
        # The last word is followed by the end of its segment: the decode says it read up to there.
        after = placed[i + 1].word.start if i + 1 < len(placed) else segments[before.segment].end
        next_s = after - offset
        if next_s - end_s < MIN_RESUME_S or not may_continue(work, end_s):
            continue
        speech = speech_seconds(work.msg, end_s, next_s)
        if speech is None or speech < MIN_SKIPPED_SPEECH_S:
            continue
        seg = segments[before.segment]
        if seg.words is not None and before.count < len(seg.words):
            seg.words = seg.words[: before.count]
            seg.tokens = seg.tokens[: before.tokens]
            seg.text = "".join(w.word for w in seg.words)
            if seg.logprobs is not None:
                seg.logprobs = seg.logprobs[: before.tokens]
        seg.end = max(seg.start, before.word.end)
        del segments[before.segment + 1 :]
        return end_s
    return None


def no_speech_threshold(work: WindowPass) -> float:
    """Above this no-speech probability a pass yields nothing, whatever its log-probability.

    A continuation runs on a hunch that speech is left; when Whisper itself thinks there is none, what
    it reads is a hallucination ("Thanks for watching!" over the last second of a window, no-speech
    0.81). A window where voice activity detection found no speech at all needs less doubt: 25 s of pink
    noise at -40 dBFS reads "Thank you." with no-speech 0.59."""
    if work.msg.speech is not None and not work.msg.speech:
        return NO_SPEECH_WITHOUT_VAD_SPEECH
    return NO_SPEECH_THRESHOLD if work.passes else 1.0


def may_continue(work: WindowPass, resume_s: float) -> bool:
    if work.msg.partial or work.options.prefix:
        return False
    return work.passes + 1 < MAX_PASSES and MIN_PROGRESS_S <= resume_s < work.msg.duration_s - TIME_PRECISION_S


def speech_after(msg: WindowRequest, start_s: float) -> bool:
    """Whether voice activity detection found at least MIN_SPEECH_AFTER_S of speech in the window after
    ``start_s`` (seconds into it); True when it did not run."""
    speech = speech_seconds(msg, start_s)
    return speech is None or speech >= MIN_SPEECH_AFTER_S


def speech_seconds(msg: WindowRequest, start_s: float = 0.0, end_s: float | None = None) -> float | None:
    """Seconds of speech voice activity detection found in the window between ``start_s`` and ``end_s``
    (seconds into it; the window's end by default); None when it did not run."""
    if msg.speech is None:
        return None
    start = msg.offset_s + start_s
    end = msg.offset_s + (msg.duration_s if end_s is None else end_s)
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in msg.speech)


def _piece(tokens: list[int], ts_begin: int, default_start: float) -> tuple[float, float, list[int]]:
    stamps = [t for t in tokens if t >= ts_begin]
    start = (stamps[0] - ts_begin) * TIME_PRECISION_S if stamps else default_start
    end = (stamps[-1] - ts_begin) * TIME_PRECISION_S if len(stamps) >= 2 else start
    return start, end, tokens
