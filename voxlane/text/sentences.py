"""Splitting normalised text into speech units.

A unit is a sentence. A sentence longer than ``max_chars`` is cut at clause boundaries (, ; : and
dashes), and a clause still too long at the last space before the limit, so no unit takes long to
synthesise.

The first unit sets the time to first audio, so it is kept short: a first sentence longer than
``FIRST_MAX_CHARS`` is cut at a clause boundary, else at the word boundary nearest ``FIRST_TARGET_CHARS``,
giving 0.45-1.1 s of audio (Piper voices speak about 18 characters per second at speed 1, measured in
docs/tts.md). The rest of that sentence is cut the same way at about twice that, a ramp: each early unit
synthesises (~0.1 s per second of audio) well within the playing time of the audio before it, even with
a few streams starting together. A first unit shorter than ``FIRST_MIN_CHARS`` (under half a second) is
merged with the next, so playback does not stutter right after the first sound.

After that, units grow (``ramp``): a unit longer than ``RAMP_GROWTH`` times the text already spoken is cut
at a clause boundary (never inside a clause) so that each early unit's synthesis stays short next to the
audio queued before it, even when the first sentence was short and the second is long. Once a few units
are out, the limit passes ``max_chars`` and units are whole sentences again (the most audio per call).

Last, a unit longer than ``clause_chars`` is cut at its clause boundaries into pieces of at most that many
characters where the clauses allow (``cap_clauses``; never inside a clause). A speech slot runs a unit to
its end, so a long unit holds a core for a long time while other streams wait for their next unit or their
first: at 16 streams on 2 cores, cutting at 60 characters instead of 300 took the last stream's first
audio from 4.6 s to 3.0 s in the scheduler's simulation, and from 4.2-6.4 s to 2.3-2.9 s on the machine
(docs/tts.md).
"""

from __future__ import annotations

import re

# A sentence ends at . ! or ? (optionally followed by closing quotes or brackets) and whitespace,
# unless the word before the dot is a common abbreviation or a single letter (initials).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "inc",
        "ltd",
        "co",
        "no",
        "fig",
        "approx",
        "dept",
        "est",
        "mt",
        "ft",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    }
)
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+|\s+(?=-\s)")

MAX_UNIT_CHARS = 300
CLAUSE_CHARS = 60
FIRST_MIN_CHARS = 8
FIRST_TARGET_CHARS = 12
FIRST_MAX_CHARS = 20
CHARS_PER_SECOND = 18.0
RAMP_GROWTH = 3.0
_WORD_GAP = re.compile(r"\s+")


def split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        candidate = text[start : match.start()].strip()
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


def split_units(
    text: str,
    max_chars: int = MAX_UNIT_CHARS,
    first_min_chars: int = FIRST_MIN_CHARS,
    clause_chars: int = CLAUSE_CHARS,
) -> list[str]:
    """Normalised text -> speech units, in order."""
    units = [piece for sentence in split_sentences(text) for piece in split_long(sentence, max_chars)]
    if len(units) >= 2 and len(units[0]) < first_min_chars:
        units[0:2] = [f"{units[0]} {units[1]}"]
    if units:
        head = cut_first(units[0])
        if len(head) == 2:  # a ramp: the second unit about twice the first, so it is ready in time too
            head[1:] = cut_first(head[1], 2 * FIRST_TARGET_CHARS, FIRST_MIN_CHARS, 2 * FIRST_MAX_CHARS)
        units[0:1] = head
    return cap_clauses(ramp(units), clause_chars)


def cap_clauses(units: list[str], clause_chars: int) -> list[str]:
    """Cut each unit longer than ``clause_chars`` at clause boundaries, packing whole clauses into pieces of
    at most ``clause_chars`` (a longer clause stays whole); a last piece under ``FIRST_MIN_CHARS`` joins the
    one before it."""
    out: list[str] = []
    for unit in units:
        if len(unit) <= clause_chars:
            out.append(unit)
            continue
        pieces: list[str] = []
        for clause in (c.strip() for c in _CLAUSE_END.split(unit)):
            if not clause:
                continue
            if pieces and len(pieces[-1]) + 1 + len(clause) <= clause_chars:
                pieces[-1] = f"{pieces[-1]} {clause}"
            else:
                pieces.append(clause)
        if len(pieces) >= 2 and len(pieces[-1]) < FIRST_MIN_CHARS:
            pieces[-2:] = [f"{pieces[-2]} {pieces[-1]}"]
        out.extend(pieces)
    return out


def ramp(units: list[str], growth: float = RAMP_GROWTH) -> list[str]:
    """Cut each unit after the first that is longer than ``growth`` times the characters before it at a
    clause boundary: the last one within that limit, else the first one after it (a clause is never cut),
    keeping ``FIRST_MIN_CHARS`` on each side."""
    out = units[:1]
    spoken = len(units[0]) if units else 0
    todo = units[1:]
    while todo:
        unit = todo.pop(0)
        limit = max(2 * FIRST_MAX_CHARS, int(growth * spoken))
        if len(unit) > limit:
            cuts = [
                m
                for m in _CLAUSE_END.finditer(unit)
                if m.start() >= FIRST_MIN_CHARS and len(unit) - m.end() >= FIRST_MIN_CHARS
            ]
            within = [m for m in cuts if m.start() <= limit]
            cut = within[-1] if within else (cuts[0] if cuts else None)
            if cut is not None:
                head, tail = unit[: cut.start()].strip(), unit[cut.end() :].strip()
                out.append(head)
                spoken += len(head)
                todo.insert(0, tail)
                continue
        out.append(unit)
        spoken += len(unit)
    return out


def cut_first(
    unit: str, target: int = FIRST_TARGET_CHARS, low: int = FIRST_MIN_CHARS, high: int = FIRST_MAX_CHARS
) -> list[str]:
    """Cut a stream's first unit so its head is ``low``..``high`` characters: at the clause (or sentence)
    end nearest ``target`` if there is one, else at the word boundary nearest ``target``. The tail must
    keep at least ``low`` characters; a unit that cannot be cut so is returned whole."""
    if len(unit) <= high:
        return [unit]
    for pattern in (_CLAUSE_END, _SENTENCE_END, _WORD_GAP):
        cuts = [m for m in pattern.finditer(unit) if low <= m.start() <= high and len(unit) - m.end() >= low]
        if cuts:
            best = min(cuts, key=lambda m: abs(m.start() - target))
            return [unit[: best.start()].strip(), unit[best.end() :].strip()]
    return [unit]
