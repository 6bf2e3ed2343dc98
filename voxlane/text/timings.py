"""Word timings for speech: which phoneme ids each word of the input became, and when each word is heard.

Two mappings, both pure (espeak comes in as a function), both run on the ``text`` executor:

1. Written words -> spoken tokens (``plan_words``). The client's words are the input's own whitespace-separated
   words (edge punctuation stripped; a token with no letter or digit is no word). The spoken text is what
   normalisation and the verbaliser made of it ("$5" -> "five dollars", "Dr." -> "Doctor"), or for SSML what
   ``sub`` and ``say-as`` put in its place. The two word lists are matched with difflib on lower-case letters
   and digits: equal words pair up, and a changed stretch becomes one group. A group of one written word spans
   all its spoken words ("$5" spans "five dollars"); a group of several written words with as many spoken ones
   pairs them in order; any other group spreads its time over its written words by their length (a
   *fallback*, counted in ``PlannedWord.spread``).
2. Spoken tokens -> phoneme ids (``token_marks``). espeak phonemises the whole unit (as before: word by word it
   would lose the sentence's stress and linking), writing a space between words but sometimes joining two or
   three ("in the" -> "ɪnðə"). Where the unit's IPA has as many words as it has tokens they pair in order;
   otherwise each token is phonemised alone and the two sequences aligned by edit distance, allowing a
   1:2, 1:3, 2:1 and 3:1 group; a joined IPA word is cut among its tokens in proportion to their own
   phonemisation's length (an *interpolated* token, ``TokenMarks.interpolated``).

Each token gets two marks, the phoneme id index where it starts and where it ends. The engine returns the
sample offset of each mark from the voice's own durations (runners/piper.py), and ``word_times`` turns those
into seconds of the stream's audio.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

PAD, BOS, EOS = "_", "^", "$"
_STRESS = "ˈˌ"
_PUNCTUATION = set(".,;:!?¡¿\"'()[]{}-—–…«»“”‘’")
_NOT_SOUNDS = set(_STRESS) | _PUNCTUATION | {" "}
_EDGE = "\"'“”‘’«»()[]{}.,;:!?¡¿…"
_KEY = re.compile(r"[\W_]+")
_GROUPS = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1))
_GROUP_PENALTY = 0.15
"""Added to the cost of a group that is not 1:1, so that equal counts pair in order when costs tie."""


def key(token: str) -> str:
    """A token's letters and digits, lower case: what two spellings of a word have in common."""
    return _KEY.sub("", token.lower())


def is_word(token: str) -> bool:
    return any(c.isalnum() for c in token)


def display(token: str) -> str:
    """The word as the client sees it: the input's spelling, without the punctuation around it."""
    return token.strip(_EDGE) or token


def ids_and_starts(phonemes: Sequence[str], id_map: Mapping[str, Sequence[int]]) -> tuple[list[int], list[int]]:
    """Piper's ids for ``phonemes`` (as ``piper.phoneme_ids.phonemes_to_ids``: BOS, a pad after each
    phoneme, EOS; a phoneme the voice lacks is skipped) and the index of each phoneme's first id (-1:
    skipped)."""
    ids = list(id_map[BOS]) + list(id_map[PAD])
    starts: list[int] = []
    for phoneme in phonemes:
        if phoneme not in id_map:
            starts.append(-1)
            continue
        starts.append(len(ids))
        ids.extend(id_map[phoneme])
        ids.extend(id_map[PAD])
    ids.extend(id_map[EOS])
    return ids, starts


@dataclass(frozen=True)
class _IpaWord:
    sounds: str
    """The word's phonemes without stress marks: what is compared with a token's own phonemisation."""
    spans: tuple[tuple[int, int], ...]
    """(first id, id after the pad) of each of its phonemes, in order."""


def _ipa_words(phonemes: Sequence[str], starts: Sequence[int], id_map: Mapping[str, Sequence[int]]) -> list[_IpaWord]:
    pad = len(id_map[PAD])
    words: list[_IpaWord] = []
    sounds: list[str] = []
    spans: list[tuple[int, int]] = []
    for phoneme, start in [*zip(phonemes, starts, strict=True), (" ", -1)]:
        if phoneme == " ":
            if spans:
                words.append(_IpaWord("".join(sounds), tuple(spans)))
            sounds, spans = [], []
        elif phoneme not in _PUNCTUATION and start >= 0:
            spans.append((start, start + len(id_map[phoneme]) + pad))
            if phoneme not in _STRESS:
                sounds.append(phoneme)
    return words


def _distance(a: str, b: str) -> float:
    """Edit distance over the longer length: 0 equal, 1 nothing in common."""
    if not a or not b:
        return 1.0
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1] / max(len(a), len(b))


def _align(words: Sequence[str], refs: Sequence[str]) -> list[tuple[int, int]]:
    """The cheapest split of IPA ``words`` and tokens' ``refs`` into groups of ``_GROUPS`` sizes, in order."""
    m, n = len(words), len(refs)
    inf = float("inf")
    cost = [[inf] * (n + 1) for _ in range(m + 1)]
    back: list[list[tuple[int, int]]] = [[(0, 0)] * (n + 1) for _ in range(m + 1)]
    cost[0][0] = 0.0
    for i in range(m + 1):
        for j in range(n + 1):
            if cost[i][j] == inf:
                continue
            for a, b in _GROUPS:
                if i + a > m or j + b > n:
                    continue
                step = _distance("".join(words[i : i + a]), "".join(refs[j : j + b]))
                step += 0.0 if (a, b) == (1, 1) else _GROUP_PENALTY
                if cost[i][j] + step < cost[i + a][j + b]:
                    cost[i + a][j + b] = cost[i][j] + step
                    back[i + a][j + b] = (a, b)
    if cost[m][n] == inf:
        return []
    groups: list[tuple[int, int]] = []
    i, j = m, n
    while i or j:
        a, b = back[i][j]
        groups.append((a, b))
        i, j = i - a, j - b
    return groups[::-1]


@dataclass(frozen=True)
class TokenMarks:
    marks: list[int]
    """Two phoneme id indices per token of the unit's text (``text.split()``): where it starts and ends
    (equal for a token that is no word)."""
    interpolated: int = 0
    """Tokens whose marks were cut from a joined IPA word, or spread over a group (see the module docstring)."""


def token_marks(
    tokens: Sequence[str],
    phonemes: Sequence[str],
    id_map: Mapping[str, Sequence[int]],
    reference: Callable[[str], str],
) -> tuple[list[int], TokenMarks]:
    """The ids of ``phonemes`` (a whole unit, spaces between words) and the marks of the unit's ``tokens``.
    ``reference(token)``: the token phonemised alone (called only where the unit's IPA words and tokens
    differ in number)."""
    ids, starts = ids_and_starts(phonemes, id_map)
    words = _ipa_words(phonemes, starts, id_map)
    spoken = [k for k, t in enumerate(tokens) if is_word(t)]
    spans: dict[int, tuple[int, int]] = {}
    interpolated = 0
    if len(words) == len(spoken):
        spans = {k: (w.spans[0][0], w.spans[-1][1]) for k, w in zip(spoken, words, strict=True)}
    elif words and spoken:
        refs = [
            "".join(c for c in reference(tokens[k]) if c not in _STRESS and c not in _PUNCTUATION and c != " ")
            for k in spoken
        ]
        groups = _align([w.sounds for w in words], refs)
        if not groups:  # no alignment: each token takes its share of the unit's phonemes
            groups = [(len(words), len(spoken))]
        i = j = 0
        for a, b in groups:
            group_spans = [s for w in words[i : i + a] for s in w.spans]
            cut = _cut(group_spans, [max(len(r), 1) for r in refs[j : j + b]])
            for k, span in zip(spoken[j : j + b], cut, strict=True):
                spans[k] = span
            interpolated += b if b > 1 else 0
            i, j = i + a, j + b
    marks: list[int] = []
    last = 1
    for k in range(len(tokens)):
        start, end = spans.get(k, (last, last))
        marks += [start, end]
        last = end
    return ids, TokenMarks(marks, interpolated)


def _cut(spans: Sequence[tuple[int, int]], weights: Sequence[int]) -> list[tuple[int, int]]:
    """Cut phoneme ``spans`` into ``len(weights)`` runs of consecutive phonemes in proportion to ``weights``."""
    total = sum(weights)
    out: list[tuple[int, int]] = []
    done = 0
    for index, weight in enumerate(weights):
        first = round(len(spans) * done / total)
        done += weight
        last = round(len(spans) * done / total) if index < len(weights) - 1 else len(spans)
        last = max(last, min(first + 1, len(spans)))
        if first >= len(spans):
            out.append((spans[-1][1], spans[-1][1]))
        else:
            out.append((spans[first][0], spans[last - 1][1]))
    return out


def spread_marks(tokens: Sequence[str], first_id: int, end_id: int) -> TokenMarks:
    """Marks for tokens said from IPA written by hand (SSML ``phoneme``): the ids spread by token length."""
    weights = [len(t) if is_word(t) else 0 for t in tokens]
    total = sum(weights) or 1
    marks: list[int] = []
    done = 0
    for weight in weights:
        start = first_id + round((end_id - first_id) * done / total)
        done += weight
        marks += [start, first_id + round((end_id - first_id) * done / total)]
    words = sum(1 for w in weights if w)
    return TokenMarks(marks, words if words > 1 else 0)


@dataclass(frozen=True)
class Segment:
    """A stretch of the input as written, and the units its spoken form was split into."""

    written: str
    first_unit: int
    units: int


@dataclass(frozen=True)
class PlannedWord:
    """One word the client sees, and the marks its time runs between: ``(unit, mark index)``."""

    word: str
    first: tuple[int, int]
    last: tuple[int, int]
    share: tuple[float, float] = (0.0, 1.0)
    """The part of the span from ``first`` to ``last`` that is this word's (0-1 each)."""
    spread: bool = False
    """True where the word's time is a share of a group's (a fallback: see the module docstring)."""


def plan_words(segments: Sequence[Segment], unit_texts: Sequence[str]) -> list[PlannedWord]:
    """The input's words in order, each tied to the marks of the spoken tokens it became."""
    plan: list[PlannedWord] = []
    for segment in segments:
        written = [t for t in segment.written.split() if is_word(t)]
        spoken = [
            (u, 2 * k, t)
            for u in range(segment.first_unit, segment.first_unit + segment.units)
            for k, t in enumerate(unit_texts[u].split())
            if is_word(t)
        ]
        plan += _plan_segment(written, spoken)
    return plan


def _plan_segment(written: list[str], spoken: list[tuple[int, int, str]]) -> list[PlannedWord]:
    if not written or not spoken:
        return []
    matcher = difflib.SequenceMatcher(None, [key(w) for w in written], [key(s[2]) for s in spoken], autojunk=False)
    groups: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            groups += [(i, i + 1, j, j + 1) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
        elif tag == "insert" and groups:  # spoken words with no written one: the word before says them
            i0, i1_, j0, _ = groups[-1]
            groups[-1] = (i0, i1_, j0, j2)
        else:
            groups.append((i1, i2, j1, j2))
    if groups and groups[0][2] > 0:  # spoken words before the first written one: the first word says them
        i0, i1_, _, j1_ = groups[0]
        groups[0] = (i0, i1_, 0, j1_)
    plan: list[PlannedWord] = []
    for i1, i2, j1, j2 in groups:
        if j2 <= j1:  # a written word with nothing spoken: no time of its own, at the end of the word before
            at = (spoken[j1 - 1][0], spoken[j1 - 1][1] + 1) if j1 > 0 else (spoken[0][0], spoken[0][1])
            plan += [PlannedWord(display(w), at, at) for w in written[i1:i2]]
        elif i2 - i1 == 1:
            plan.append(PlannedWord(display(written[i1]), spoken[j1][:2], (spoken[j2 - 1][0], spoken[j2 - 1][1] + 1)))
        elif i2 - i1 == j2 - j1:
            plan += [
                PlannedWord(display(w), spoken[j][:2], (spoken[j][0], spoken[j][1] + 1))
                for w, j in zip(written[i1:i2], range(j1, j2), strict=True)
            ]
        else:
            first, last = spoken[j1][:2], (spoken[j2 - 1][0], spoken[j2 - 1][1] + 1)
            lengths = [len(key(w)) or 1 for w in written[i1:i2]]
            total, done = sum(lengths), 0
            for w, length in zip(written[i1:i2], lengths, strict=True):
                share = (done / total, (done + length) / total)
                done += length
                plan.append(PlannedWord(display(w), first, last, share, spread=True))
    return plan


@dataclass(frozen=True)
class WordTime:
    word: str
    start_s: float
    end_s: float


def unit_marks_s(offset_s: float, marks: Sequence[int], sample_rate: int) -> list[float]:
    """A unit's marks in seconds of the stream: the unit starts ``offset_s`` into the audio."""
    return [offset_s + m / sample_rate for m in marks]


def word_times(plan: Sequence[PlannedWord], start: int, marks_s: Mapping[int, Sequence[float]]) -> list[WordTime]:
    """The words of ``plan`` from index ``start`` whose units have all been heard (``marks_s``: each finished
    unit's marks in seconds), in order, stopping at the first that is still to come."""
    out: list[WordTime] = []
    for word in plan[start:]:
        if word.first[0] not in marks_s or word.last[0] not in marks_s:
            break
        t0 = marks_s[word.first[0]][word.first[1]]
        t1 = marks_s[word.last[0]][word.last[1]]
        out.append(
            WordTime(word.word, round(t0 + (t1 - t0) * word.share[0], 3), round(t0 + (t1 - t0) * word.share[1], 3))
        )
    return out
