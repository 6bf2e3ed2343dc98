"""What one decode of a window read, and the rules that choose between decodes of it.

Like faster-whisper, a window whose greedy output looks degenerate (compression ratio above 2.4 or mean
log-probability below -1) is decoded again at rising temperatures (``fallback_wins``); a doubted window is
decoded again with a beam (``beam_wins``); and a live final read short is checked for loops
(``short_read_loops``).
"""

from __future__ import annotations

import math
import zlib

from voxlane.text.repeats import cut_repeats

FALLBACK_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0)
COMPRESSION_RATIO_THRESHOLD = 2.4
LOG_PROB_THRESHOLD = -1.0
NO_SPEECH_THRESHOLD = 0.6
SHORT_TOKENS_PER_S = 12
"""Most tokens a short window (``--short-window-pad-s``) may decode per second of its audio: words, and the
timestamps around its segments; past that, Whisper repeats itself in the silence after the audio."""
CONTEXT_CHECK_WORDS = 8
"""A live final read short loops if its text repeats the last this many words of its forced context."""


def compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / max(1, len(zlib.compress(data)))


class Decoded:
    """One decode of a window: its tokens (the forced prefix taken off), text and scores."""

    __slots__ = ("avg_logprob", "beam_size", "compression_ratio", "no_speech_prob", "temperature", "text", "tokens")

    def __init__(
        self,
        tokens: list[int],
        avg_logprob: float,
        no_speech_prob: float,
        temperature: float,
        text: str,
        beam_size: int = 1,
    ) -> None:
        self.beam_size = beam_size
        self.tokens = tokens
        self.avg_logprob = avg_logprob
        self.no_speech_prob = no_speech_prob
        self.temperature = temperature
        self.text = text
        self.compression_ratio = compression_ratio(text)

    @property
    def needs_fallback(self) -> bool:
        if self.no_speech_prob > NO_SPEECH_THRESHOLD and self.avg_logprob < LOG_PROB_THRESHOLD:
            return False  # silence: retrying only invents words
        return self.compression_ratio > COMPRESSION_RATIO_THRESHOLD or self.avg_logprob < LOG_PROB_THRESHOLD

    @property
    def is_silence(self) -> bool:
        return self.no_speech_prob > NO_SPEECH_THRESHOLD and self.avg_logprob < LOG_PROB_THRESHOLD


def fallback_wins(best: Decoded, candidate: Decoded) -> bool:
    """Whether a decode at a fallback temperature replaces the best so far: it does not repeat itself (where
    the best does not), and it is likelier, or the best's text repeats itself."""
    return (
        candidate.compression_ratio <= COMPRESSION_RATIO_THRESHOLD
        and (repeats(best.text) or not repeats(candidate.text))
        and (candidate.avg_logprob > best.avg_logprob or best.compression_ratio > COMPRESSION_RATIO_THRESHOLD)
    )


def beam_wins(first: Decoded, beam: Decoded) -> bool:
    """Whether the doubt beam's decode replaces the first one: unless it needs the temperature fallback
    where the first did not, or repeats itself where the first did not. A beam prefers a loop's likely
    tokens ("6, 6, 6, 6, 6, 6, 6, 6", mean log-probability -0.22, for "6.", -1.01, on a 1.8 s clip), and on
    a short text the compression ratio cannot tell."""
    if beam.needs_fallback and not first.needs_fallback:
        return False
    return not (repeats(beam.text) and not repeats(first.text))


def short_read_loops(text: str, avg_logprob: float, context: str | None = None) -> bool:
    """Whether a short window's read went wrong the way short reads of live finals do: the text loops
    ("Montreal, Montreal, Montreal, ...", "whisper-da-da-da"), or says its forced ``context`` again
    ("Montreal, forced." after the context "Montreal, forced."), or the decoder doubts it as the temperature
    fallback would (compression ratio over 2.4, mean log-probability under -1)."""
    tail = (context or "").replace("-", " ").split()[-CONTEXT_CHECK_WORDS:]
    words = text.replace("-", " ").split()  # "whisper-da-da-da" loops inside a word
    return (
        compression_ratio(text) > COMPRESSION_RATIO_THRESHOLD
        or avg_logprob < LOG_PROB_THRESHOLD
        or (loops([*tail, *words]) and not loops(tail))
    )


def short_token_cap(duration_s: float) -> int:
    """Most tokens a short window decodes past its prompt (SHORT_TOKENS_PER_S)."""
    return SHORT_TOKENS_PER_S * math.ceil(duration_s) + 8


def repeats(text: str) -> bool:
    return loops(text.split())


def loops(words: list[str]) -> bool:
    return len(cut_repeats(words)) < len(words)
