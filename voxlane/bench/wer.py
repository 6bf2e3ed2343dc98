"""Word error rate: the one implementation every benchmark and test of this project uses.

A reference and a hypothesis are normalised alike (Whisper's English normaliser: lower case, no punctuation,
numbers and spellings standardised, fillers such as uh/um/hm dropped), split into words and aligned by
jiwer. A corpus's WER is all substitutions + deletions + insertions over all reference words (pairs are
aligned one by one, then summed), as jiwer computes it over lists.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Normaliser = Callable[[str], str]


def basic_normaliser(text: str) -> str:
    """Lower case, drop accents and punctuation (keeping apostrophes inside words), squeeze spaces.

    Used only when Whisper's EnglishTextNormalizer (package ``whisper-normalizer``) is not installed.
    """
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = re.sub(r"[^\w\s']|_", " ", text)
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    return " ".join(text.split())


@functools.cache
def _whisper_normaliser() -> Normaliser:
    from whisper_normalizer.english import EnglishTextNormalizer

    normaliser: Normaliser = EnglishTextNormalizer()
    return normaliser


def normalise(text: str) -> str:
    """Whisper's English normaliser (needs ``whisper-normalizer``, a dependency of the ``dev`` extra)."""
    return _whisper_normaliser()(text)


def text_normaliser() -> tuple[str, Normaliser]:
    """(name, function): Whisper's English normaliser when importable, else :func:`basic_normaliser`."""
    try:
        function = _whisper_normaliser()
    except ImportError:
        return "basic (lower case, no punctuation; whisper-normalizer not installed)", basic_normaliser
    return "whisper EnglishTextNormalizer (whisper-normalizer)", function


@dataclass
class Score:
    """Errors of one or more transcripts against their references, after normalising."""

    words: int = 0
    """Reference words (after normalising)."""
    sub: int = 0
    dels: int = 0
    ins: int = 0
    output_words: int = 0

    @property
    def errors(self) -> int:
        return self.sub + self.dels + self.ins

    @property
    def wer(self) -> float:
        return self.errors / self.words if self.words else math.nan

    def __iadd__(self, other: Score) -> Score:
        self.words += other.words
        self.sub += other.sub
        self.dels += other.dels
        self.ins += other.ins
        self.output_words += other.output_words
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "words": self.words,
            "sub": self.sub,
            "del": self.dels,
            "ins": self.ins,
            "output_words": self.output_words,
            "wer": None if math.isnan(self.wer) else self.wer,
        }

    def counts(self) -> dict[str, int]:
        """Reference words, substitutions, deletions and insertions."""
        return {"words": self.words, "sub": self.sub, "del": self.dels, "ins": self.ins}


def score(reference: str, hypothesis: str, normalise: Normaliser = normalise) -> Score:
    """One transcript against its reference. An empty reference has no words: whatever was output counts
    as insertions."""
    import jiwer

    ref, hyp = normalise(reference).split(), normalise(hypothesis).split()
    if not ref:
        return Score(output_words=len(hyp), ins=len(hyp))
    out = jiwer.process_words(" ".join(ref), " ".join(hyp) if hyp else "")
    return Score(len(ref), out.substitutions, out.deletions, out.insertions, len(hyp))


def total(
    references: Iterable[str],
    hypotheses: Iterable[str],
    normalise: Normaliser = normalise,
    skip_empty_references: bool = False,
) -> tuple[Score, int]:
    """The summed :func:`score` of the pairs, and how many pairs counted (with ``skip_empty_references``,
    pairs whose normalised reference is empty are left out)."""
    summed, counted = Score(), 0
    for ref, hyp in zip(references, hypotheses):
        if skip_empty_references and not normalise(ref).strip():
            continue
        summed += score(ref, hyp, normalise)
        counted += 1
    return summed, counted


def wer(references: Iterable[str], hypotheses: Iterable[str], normalise: Normaliser = normalise) -> float:
    """Corpus WER of the pairs (NaN when the references hold no words)."""
    return total(references, hypotheses, normalise)[0].wer


def word_error_rate(references: Iterable[str], hypotheses: Iterable[str], normalise: Normaliser) -> tuple[float, int]:
    """Corpus WER and how many pairs counted; pairs whose normalised reference is empty are left out."""
    summed, counted = total(references, hypotheses, normalise, skip_empty_references=True)
    return summed.wer, counted


def error_counts(references: Iterable[str], hypotheses: Iterable[str], normalise: Normaliser) -> dict[str, int]:
    """Reference words, substitutions, deletions and insertions over the pairs (pairs whose normalised
    reference is empty are left out, as in :func:`word_error_rate`)."""
    return total(references, hypotheses, normalise, skip_empty_references=True)[0].counts()
