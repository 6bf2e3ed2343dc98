"""WER with Whisper's English normaliser (lower case, no punctuation, numbers and spellings
standardised, fillers such as uh/um/hm dropped), applied to reference and hypothesis alike."""

from __future__ import annotations

from collections.abc import Sequence

import jiwer
from whisper_normalizer.english import EnglishTextNormalizer

_normalise = EnglishTextNormalizer()


def normalise(text: str) -> str:
    return _normalise(text)


def wer(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    refs = [normalise(r) for r in references]
    hyps = [normalise(h) for h in hypotheses]
    return float(jiwer.wer(refs, hyps))
