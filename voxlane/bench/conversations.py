"""Synthetic conversations for ``voxlane bench diarize``, built from the dev set's read speech.

Each two-speaker recording of the dataset (named ``long_so762_A_B.flac``: :data:`TWO_SPEAKER`) joins 20
recordings of one speechocean762 speaker, then 20 of a second, with digital silence (exact zeros) between
recordings: cut at those zeros, the file gives 40 pieces, the first 20 of one speaker and the last 20 of the
other. (The m4a copy is lossy, its silence is not zeros: it is left out; so are the one-speaker files.) A
conversation takes 2 to 4 of those speakers, turns of 3 to 15 s (whole pieces of one speaker, 0.1-0.3 s apart),
pauses of 0.2 to 1 s between turns, or, in the overlap variant, every third turn starting 0.5 s before the
previous one ends. The reference turns are the pieces' spans of sound (their own room noise trimmed by level).
Known-speaker references are 2-10 s of pieces of the same speaker that the conversation does not use.
"""

from __future__ import annotations

import difflib
import io
import itertools
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

SAMPLE_RATE = 16000
TWO_SPEAKER = re.compile(r"long_so762_(\d+)_(\d+)\.flac")
"""The name of a two-speaker recording: speaker A's 20 pieces, then speaker B's, digital silence between."""


@dataclass
class Piece:
    speaker: str
    pcm: np.ndarray
    """int16, 16 kHz, from its first to its last non-zero sample."""
    sound: tuple[int, int]
    """Samples of the piece above its room noise (the speech), relative to ``pcm``."""
    text: str = ""
    words: list[tuple[str, float]] = field(default_factory=list)
    """The reference's words with their times in seconds from the start of ``pcm`` (``piece_texts``)."""


@dataclass(frozen=True)
class Voice:
    f0_hz: float
    gender: str
    """"F" or "M", by ``f0_hz`` (bench/hard_conversations.py)."""


@dataclass
class Turn:
    speaker: str
    start: float
    end: float


@dataclass
class Conversation:
    name: str
    pcm: np.ndarray
    turns: list[Turn]
    """Reference: each piece's speech, by speaker (pieces of one turn are separate entries)."""
    text: str
    speakers: list[str]
    references: dict[str, np.ndarray] = field(default_factory=dict)
    """speaker -> int16 audio of 2-10 s of that speaker, not in the conversation."""
    overlap: bool = False
    voices: dict[str, Voice] = field(default_factory=dict)
    """The hard set's: each speaker's median F0 and the gender it implies."""
    short_turns: int = 0
    """The hard set's: replies of 0.3-1 s between two turns of one other speaker."""

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / SAMPLE_RATE


def _cut(pcm: np.ndarray, min_zero_s: float = 0.25) -> list[tuple[int, int]]:
    zero = np.concatenate(([0], (pcm == 0).view(np.int8) if pcm.dtype == np.bool_ else (pcm == 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(zero))
    runs = [(a, b) for a, b in zip(edges[::2], edges[1::2]) if b - a >= min_zero_s * SAMPLE_RATE]
    cuts = [0] + [(a + b) // 2 for a, b in runs] + [len(pcm)]
    out = []
    for a, b in itertools.pairwise(cuts):
        nz = np.flatnonzero(pcm[a:b])
        if len(nz) > SAMPLE_RATE // 10:
            out.append((a + int(nz[0]), a + int(nz[-1]) + 1))
    return out


def _sound(pcm: np.ndarray) -> tuple[int, int]:
    """First and last sample of the 20 ms frames within 35 dB of the piece's loudest."""
    hop = SAMPLE_RATE // 50
    n = len(pcm) // hop
    frames = pcm[: n * hop].astype(np.float64).reshape(n, hop)
    level = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-9)
    loud = np.flatnonzero(level > level.max() - 35)
    return int(loud[0]) * hop, int(loud[-1] + 1) * hop


def two_speaker_sources(dev_dir: Path) -> list[str]:
    """The file names of the two-speaker recordings in ``dev_dir``'s manifest, in its order."""
    names = [name for name in references_file(dev_dir) if TWO_SPEAKER.fullmatch(name)]
    if not names:
        raise ValueError(
            f"{dev_dir / 'manifest.jsonl'} lists no two-speaker recording (audio/long_so762_SPEAKER_SPEAKER.flac): "
            "pass the dev data set's directory"
        )
    return names


def load_pieces(dev_dir: Path) -> dict[str, list[Piece]]:
    """Speaker -> their pieces, in order, from the two-speaker recordings of ``dev_dir``."""
    speakers: dict[str, list[Piece]] = {}
    for name in two_speaker_sources(dev_dir):
        pcm, rate = sf.read(dev_dir / "audio" / name, dtype="int16")
        if rate != SAMPLE_RATE:
            raise ValueError(f"{name}: expected 16 kHz, got {rate}")
        spans = _cut(pcm)
        if len(spans) != 40:
            raise ValueError(f"{name}: expected 40 pieces between digital silences, found {len(spans)}")
        ids = name.removeprefix("long_so762_").removesuffix(".flac").split("_")
        for k, (a, b) in enumerate(spans):
            piece = pcm[a:b]
            speakers.setdefault(ids[k // 20], []).append(Piece(ids[k // 20], piece, _sound(piece)))
    return speakers


def piece_texts(
    speakers: dict[str, list[Piece]], dev_dir: Path, reference: dict[str, str], words: dict[str, list[dict]]
) -> None:
    """Give each piece its words of the source file's reference: the reference is aligned (difflib, on
    lower-cased words) to a transcript of the source with word timestamps (``words[file]``: dicts with
    ``word``, ``start``, ``end``), each reference word takes the time of the word it matched (or of its
    nearest matched neighbour), and falls in the piece that holds that time (or the pause after it). The
    sources are those ``words`` holds."""
    for name in words:
        ids = name.removeprefix("long_so762_").removesuffix(".flac").split("_")
        pieces = speakers[ids[0]][:20] + speakers[ids[1]][:20]
        ref = reference[name].split()
        hyp = words[name]
        ref_norm = [w.lower().strip(".,?!\"'") for w in ref]
        hyp_norm = [w["word"].lower().strip(" .,?!\"'") for w in hyp]
        times: list[float | None] = [None] * len(ref)
        for a, b, size in difflib.SequenceMatcher(None, ref_norm, hyp_norm, autojunk=False).get_matching_blocks():
            for k in range(size):
                times[a + k] = (hyp[b + k]["start"] + hyp[b + k]["end"]) / 2
        matched = [i for i, t in enumerate(times) if t is not None]
        if not matched:
            raise ValueError(f"{name}: the transcript matches none of the reference's words")
        filled = [times[min(matched, key=lambda k: abs(k - i))] for i in range(len(ref))]
        pcm, _ = sf.read(dev_dir / "audio" / name, dtype="int16")
        spans = _cut(pcm)
        for k, piece in enumerate(pieces):
            lo = spans[k][0] / SAMPLE_RATE if k else -math.inf
            hi = spans[k + 1][0] / SAMPLE_RATE if k + 1 < len(spans) else math.inf
            piece.words = [
                (w, t - spans[k][0] / SAMPLE_RATE) for w, t in zip(ref, filled) if t is not None and lo <= t < hi
            ]
            piece.text = " ".join(w for w, _ in piece.words)


def build(
    speakers: dict[str, list[Piece]],
    count: int,
    seed: int,
    overlap_every: int = 0,
    known: bool = False,
    max_s: float = 75.0,
    n_speakers: int | None = None,
) -> list[Conversation]:
    """``count`` conversations of about ``max_s`` seconds (2, 3, 4, 2, ... speakers, or ``n_speakers``); with
    ``overlap_every`` = 3, every third turn overlaps the one before by 0.5 s."""
    rng = random.Random(seed)
    names = sorted(speakers)
    out = []
    for c in range(count):
        n_here = n_speakers or 2 + c % 3
        chosen = rng.sample(names, n_here)
        cursor = {s: rng.randrange(0, 6) for s in chosen}
        spare = {s: [p for p in speakers[s][14:]] for s in chosen}  # the last 6 pieces: references only
        segments: list[tuple[int, np.ndarray, str, tuple[int, int]]] = []  # (start sample, pcm, speaker, sound)
        turns: list[Turn] = []
        texts: list[str] = []
        at = 0
        prev = None
        n_turns = 0
        while True:
            options = [s for s in chosen if s != prev and cursor[s] < 14]
            if not options or at > max_s * SAMPLE_RATE:
                break
            if n_turns < n_here:  # everyone speaks early
                unseen = [s for s in options if s not in {t.speaker for t in turns}]
                options = unseen or options
            who = rng.choice(options)
            target_s = rng.uniform(3.0, 15.0)
            if n_turns and overlap_every and n_turns % overlap_every == 0:
                at = max(0, at - SAMPLE_RATE // 2)
            elif n_turns:
                at += int(rng.uniform(0.2, 1.0) * SAMPLE_RATE)
            turn_start = at
            while cursor[who] < 14 and (at - turn_start) < target_s * SAMPLE_RATE:
                piece = speakers[who][cursor[who]]
                cursor[who] += 1
                if at > turn_start:
                    at += int(rng.uniform(0.1, 0.3) * SAMPLE_RATE)
                segments.append((at, piece.pcm, who, piece.sound))
                turns.append(Turn(who, (at + piece.sound[0]) / SAMPLE_RATE, (at + piece.sound[1]) / SAMPLE_RATE))
                texts.append(piece.text)
                at += len(piece.pcm)
                if (at - turn_start) > 15 * SAMPLE_RATE:
                    break
            prev = who
            n_turns += 1
        mix = np.zeros(at, dtype=np.int32)
        for start, pcm, _, _ in segments:
            mix[start : start + len(pcm)] += pcm
        conv = Conversation(
            f"conv{c:02d}-{n_here}spk{'-overlap' if overlap_every else ''}",
            np.clip(mix, -32768, 32767).astype(np.int16),
            turns,
            " ".join(t for t in texts if t),
            chosen,
            overlap=bool(overlap_every),
        )
        if known:
            for s in chosen:
                ref: list[np.ndarray] = []
                for p in spare[s]:
                    if sum(len(r) for r in ref) + len(p.pcm) > 9.5 * SAMPLE_RATE:
                        break
                    ref.append(p.pcm)
                audio = np.concatenate(ref)
                if len(audio) >= 2 * SAMPLE_RATE:
                    conv.references[s] = audio
        out.append(conv)
    return out


def wav_bytes(pcm: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, pcm, SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def references_file(path: Path) -> dict[str, str]:
    """file name -> reference text, from the manifest.jsonl in ``path``, in its order."""
    manifest = path / "manifest.jsonl"
    if not manifest.is_file():
        raise ValueError(f"no manifest.jsonl in {path}: pass the dev data set's directory (manifest.jsonl, audio/)")
    out = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[Path(row["audio"]).name] = row["text"]
    return out
