"""Text normalisation before splitting: what espeak would mis-read or choke on, made plain, and numbers,
dates, money, units, addresses and abbreviations written out as words (voxlane/text/verbalise.py)."""

from __future__ import annotations

import re
import unicodedata

from voxlane.text.verbalise import verbalise

_REPLACEMENTS = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": ", ",
        "\u2014": ", ",
        "\u2026": "...",
        "\u00a0": " ",
    }
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"\s+")
_REPEATED_PUNCT = re.compile(r"([!?,;:])\1{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,;:!?])")


def normalise(text: str) -> str:
    """NFKC, verbalised (before the dashes go: "5–10" is a range), typographic quotes and dashes to plain
    ones, control characters out, runs of whitespace to one space, '!!!!' to '!!'."""
    text = verbalise(unicodedata.normalize("NFKC", text)).translate(_REPLACEMENTS)
    text = _CONTROL.sub(" ", text)
    text = _REPEATED_PUNCT.sub(r"\1\1", text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return _SPACES.sub(" ", text).strip()
