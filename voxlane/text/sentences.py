"""Splitting normalised text into speech units.

A unit is a sentence. A sentence longer than ``max_chars`` is cut at clause boundaries (, ; : and
dashes), and a clause still too long at the last space before the limit, so no unit takes long to
synthesise. A first unit shorter than ``first_min_chars`` (about half a second of speech: Piper voices
speak about 14 characters per second at speed 1, measured in docs/tts.md) is merged with the next, so
playback does not stutter right after the first sound.
"""

from __future__ import annotations

import re

# A sentence ends at . ! or ? (optionally followed by closing quotes or brackets) and whitespace,
# unless the word before the dot is a common abbreviation or a single letter (initials).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd", "co", "no",
    "fig", "approx", "dept", "est", "mt", "ft", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec",
})
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+|\s+(?=-\s)")

MAX_UNIT_CHARS = 300
FIRST_MIN_CHARS = 8
CHARS_PER_SECOND = 14.0


def split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        candidate = text[start:match.start()].strip()
        last_word = candidate.rsplit(None, 1)[-1].rstrip(".").lower() if candidate else ""
        if last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha() and candidate.endswith(".")):
            continue
        if candidate:
            sentences.append(candidate)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def split_long(sentence: str, max_chars: int) -> list[str]:
    """Cut a sentence longer than ``max_chars`` at clause boundaries, then at spaces."""
    if len(sentence) <= max_chars:
        return [sentence]
    pieces: list[str] = []
    current = ""
    for clause in _CLAUSE_END.split(sentence):
        clause = clause.strip()
        if not clause:
            continue
        if current and len(current) + 1 + len(clause) > max_chars:
            pieces.append(current)
            current = clause
        else:
            current = f"{current} {clause}" if current else clause
    if current:
        pieces.append(current)
    out: list[str] = []
    for piece in pieces:
        while len(piece) > max_chars:
            cut = piece.rfind(" ", 0, max_chars)
            if cut <= 0:
                cut = max_chars
            out.append(piece[:cut].strip())
            piece = piece[cut:].strip()
        if piece:
            out.append(piece)
    return out


def split_units(text: str, max_chars: int = MAX_UNIT_CHARS, first_min_chars: int = FIRST_MIN_CHARS) -> list[str]:
    """Normalised text -> speech units, in order."""
    units = [piece for sentence in split_sentences(text) for piece in split_long(sentence, max_chars)]
    if len(units) >= 2 and len(units[0]) < first_min_chars:
        units[0:2] = [f"{units[0]} {units[1]}"]
    return units
