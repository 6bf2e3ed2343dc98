"""Word timestamps and token log-probabilities: one forced pass of the decoder over each window's text gives
both (CTranslate2's ``align``: the cross-attention's path, and each text token's probability given the audio
and the tokens before it)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import cache

import ctranslate2
import numpy as np
import tokenizers
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import merge_punctuations

from voxlane.messages import Segment, TokenLogprob, WindowResult, Word
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper_segments import PlacedWord, cut_at_skipped_speech

TOKENS_PER_SECOND = 50  # encoder frames per second (mel frames / 2)
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"


def align(
    decoder: ctranslate2.models.Whisper,
    batch: Sequence[WindowPass],
    results: Sequence[WindowResult],
    encoded: ctranslate2.StorageView,
    toks: Sequence[Tokenizer],
    hf_tokenizer: tokenizers.Tokenizer,
) -> list[float | None]:
    """Add word timestamps and token log-probabilities to the segments of ``results``, for the windows of
    ``batch`` that asked; ``toks`` holds each window's tokenizer (its task and language). Returns, for each
    window, where a continuation should start because its words skip speech (``cut_at_skipped_speech``),
    or None."""
    resumes: list[float | None] = [None] * len(batch)
    text_tokens = [[t for seg in r.segments for t in seg.tokens] for r in results]
    sot_sequences = [tok.sot_sequence for tok in toks]
    if all(seq == sot_sequences[0] for seq in sot_sequences):
        alignments = decoder.align(
            encoded, sot_sequences[0], text_tokens, [w.msg.n_frames for w in batch], median_filter_width=7
        )
    else:  # a multilingual batch of several languages: align() takes one start sequence per call
        alignments = [
            decoder.align(
                take_rows(encoded, [i], len(batch)),
                sot_sequences[i],
                [text_tokens[i]],
                [w.msg.n_frames],
                median_filter_width=7,
            )[0]
            for i, w in enumerate(batch)
        ]
    for i, (work, result, tokens, alignment, tok) in enumerate(zip(batch, results, text_tokens, alignments, toks)):
        if work.options.logprobs:
            add_logprobs(result.segments, alignment.text_token_probs, hf_tokenizer)
        if not work.options.word_timestamps:
            continue
        words = word_timings(tok, tokens, alignment, work.msg.offset_s, work.msg.duration_s)
        # Hand the words out to segments in order, by how many tokens each segment holds.
        cursor = 0
        placed: list[PlacedWord] = []
        for k, seg in enumerate(result.segments):
            seg_words, used = [], 0
            while cursor < len(words) and used < len(seg.tokens):
                word, n_tokens = words[cursor]
                used += n_tokens
                if word.word:
                    seg_words.append(word)
                    placed.append(PlacedWord(k, len(seg_words), used, word))
                cursor += 1
            seg.words = seg_words
        resumes[i] = cut_at_skipped_speech(work, result.segments, placed)
    return resumes


def word_timings(
    tok: Tokenizer,
    tokens: list[int],
    alignment: ctranslate2.models.WhisperAlignmentResult,
    offset_s: float,
    duration_s: float,
) -> list[tuple[Word, int]]:
    """Each word of ``tokens`` with its times in the original audio, and how many tokens it holds."""
    words, word_tokens = tok.split_to_word_tokens([*tokens, tok.eot])
    if len(word_tokens) <= 1 or not alignment.alignments:
        return []
    text_idx = np.array([p[0] for p in alignment.alignments])
    time_idx = np.array([p[1] for p in alignment.alignments])
    jumps = np.pad(np.diff(text_idx), (1, 0), constant_values=1).astype(bool)
    jump_times = time_idx[jumps] / TOKENS_PER_SECOND
    bounds = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    probs = alignment.text_token_probs
    timed = []
    for k, (start_i, end_i) in enumerate(itertools.pairwise(bounds)):
        start = float(jump_times[min(start_i, len(jump_times) - 1)])
        end = float(jump_times[min(end_i, len(jump_times) - 1)])
        timed.append(
            {
                "word": words[k],
                "tokens": word_tokens[k],
                "start": start,
                "end": end,
                "probability": float(np.mean(probs[start_i:end_i])) if end_i > start_i else 0.0,
            }
        )
    merge_punctuations(timed, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS)
    out = []
    for t in timed:
        start = round(offset_s + min(t["start"], duration_s), 3)
        end = round(offset_s + min(max(t["end"], t["start"]), duration_s), 3)
        out.append((Word(t["word"], start, end, round(t["probability"], 4)), len(t["tokens"])))
    return out


def add_logprobs(segments: Sequence[Segment], probs: Sequence[float], tokenizer: tokenizers.Tokenizer) -> None:
    """Hand the window's token probabilities (one per text token, in order, then end-of-text's) out to its
    segments as log-probabilities."""
    at = 0
    for seg in segments:
        seg.logprobs = []
        for token, p in zip(seg.tokens, probs[at : at + len(seg.tokens)]):
            raw = _token_bytes(tokenizer, token)
            seg.logprobs.append(
                TokenLogprob(raw.decode("utf-8", errors="replace"), list(raw), round(math.log(max(p, 1e-12)), 5))
            )
        at += len(seg.tokens)


@cache
def _byte_of_char() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, reversed: the vocabulary writes each byte as one printable
    character (the 188 printable Latin-1 bytes as themselves, the other 68 as U+0100 onwards)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = dict(zip(printable, printable))
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


def _token_bytes(tokenizer: tokenizers.Tokenizer, token: int) -> bytes:
    piece = tokenizer.id_to_token(token) or ""
    table = _byte_of_char()
    return bytes(table[c] for c in piece if c in table)


def take_rows(encoded: ctranslate2.StorageView, rows: list[int], batch_size: int) -> ctranslate2.StorageView:
    """The encoder output of some rows of the batch (the whole output when all rows are wanted). On a GPU
    the rows go through host memory (a fallback or a prompt group is a few windows: ~0.4 MB each in float16)."""
    if len(rows) == batch_size:
        return encoded
    if encoded.device == "cpu":
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(np.asarray(encoded)[rows]))
    host = np.asarray(encoded.to_device(ctranslate2.Device.cpu))
    taken = ctranslate2.StorageView.from_array(np.ascontiguousarray(host[rows]))
    return taken.to_device(ctranslate2.Device.cuda)
