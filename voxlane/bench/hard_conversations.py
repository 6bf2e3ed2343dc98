"""The hard set of ``voxlane bench diarize --set hard``: conversations of the dev set's speakers
(bench/conversations.py ``load_pieces``) that the default set spares the diarizer.

- Same-gender pairs: each speaker's voice pitch is estimated (:func:`median_f0`, autocorrelation over their
  pieces' voiced frames) and the speaker called F or M by it (:data:`F0_SPLIT_HZ`); the two-speaker
  conversations all pair two speakers of one gender, alternating women and men.
- Many speakers: 3, 4, 5 and 6 speakers a conversation, turns of 2-10 s; each speaker holds at least one.
- Short turns: a 0.3-1 s reply ("yes") between two long turns of one other speaker, cut at a dip of level
  from one of the speaker's shortest pieces (those are kept out of the long turns); at least two a
  conversation.

:data:`COMPOSITION` is the set's plan; a seed picks the speakers, pieces, turns and pauses.
"""

from __future__ import annotations

import random

import numpy as np

from voxlane.bench.conversations import SAMPLE_RATE, Conversation, Piece, Turn, Voice

F0_SPLIT_HZ = 165.0
"""A median F0 above this is called a woman's voice, below a man's (adult speech: about 85-155 Hz for men,
165-255 Hz for women)."""
COMPOSITION: tuple[tuple[int, int], ...] = ((2, 8), (3, 4), (4, 4), (5, 4), (6, 4))
"""(speakers a conversation, conversations): 24 in all; the 2-speaker ones are same-gender pairs."""
SHORT_PIECES = 3
"""Each speaker's shortest pieces among those conversations use: the short turns are cut from them."""
SHORT_TURN_S = (0.3, 1.0)
LONG_TURN_S = (2.0, 10.0)
MIN_SHORT_TURNS = 2
SHORT_TURN_CHANCE = 0.35
"""After each long turn, a short reply by another speaker comes with this probability (then the first
speaker goes on)."""


def frame_f0(pcm: np.ndarray, frame_s: float = 0.04, hop_s: float = 0.01) -> np.ndarray:
    """F0 (Hz) of the voiced frames of ``pcm``: the lag (60-400 Hz) of each frame's autocorrelation peak,
    kept where that peak is at least 0.5 of the frame's energy and the frame within 30 dB of the loudest."""
    x = pcm.astype(np.float64)
    size, hop = int(frame_s * SAMPLE_RATE), int(hop_s * SAMPLE_RATE)
    if len(x) < size:
        return np.zeros(0)
    frames = np.lib.stride_tricks.sliding_window_view(x, size)[::hop]
    frames = frames - frames.mean(axis=1, keepdims=True)
    energy = (frames**2).sum(axis=1)
    loud = 10 * np.log10(energy + 1e-9) > 10 * np.log10(energy.max() + 1e-9) - 30
    spectrum = np.fft.rfft(frames * np.hanning(size), n=2 * size, axis=1)
    ac = np.fft.irfft(np.abs(spectrum) ** 2, axis=1)[:, :size]
    lo, hi = SAMPLE_RATE // 400, SAMPLE_RATE // 60
    r = ac[:, lo : hi + 1] / np.maximum(ac[:, :1], 1e-9)
    best = r.max(axis=1)
    # The shortest lag whose peak is near the best one: a period's multiples peak almost as high (octave errors).
    peaks = (r[:, 1:-1] >= 0.9 * best[:, None]) & (r[:, 1:-1] >= r[:, :-2]) & (r[:, 1:-1] >= r[:, 2:])
    lag = lo + 1 + np.argmax(peaks, axis=1)
    voiced = loud & (best >= 0.5) & peaks.any(axis=1)
    return SAMPLE_RATE / lag[voiced]


def median_f0(pieces: list[Piece]) -> float:
    """The median F0 of a speaker's voiced frames over all their pieces' sound."""
    f0 = np.concatenate([frame_f0(p.pcm[p.sound[0] : p.sound[1]]) for p in pieces])
    return float(np.median(f0)) if len(f0) else float("nan")


def voices(speakers: dict[str, list[Piece]]) -> dict[str, Voice]:
    out = {}
    for name, pieces in speakers.items():
        f0 = median_f0(pieces)
        out[name] = Voice(f0, "F" if f0 > F0_SPLIT_HZ else "M")
    return out


def short_cut(piece: Piece, rng: random.Random) -> int:
    """Where a short turn cut from ``piece`` ends (samples into its pcm): the quietest 10 ms frame between
    :data:`SHORT_TURN_S` after its sound starts (a pause between words, when there is one), at a length drawn
    from that range when the piece has no dip."""
    hop = SAMPLE_RATE // 100
    first = piece.sound[0]
    lo, hi = (int(s * SAMPLE_RATE) for s in SHORT_TURN_S)
    hi = min(hi, piece.sound[1] - first)
    span = piece.pcm[first + lo : first + hi].astype(np.float64)
    n = len(span) // hop
    if n < 3:
        return first + min(hi, int(rng.uniform(*SHORT_TURN_S) * SAMPLE_RATE))
    level = 10 * np.log10((span[: n * hop].reshape(n, hop) ** 2).mean(axis=1) + 1e-9)
    return first + lo + int(np.argmin(level[1:-1]) + 1) * hop + hop // 2


def build_hard(
    speakers: dict[str, list[Piece]], seed: int, composition: tuple[tuple[int, int], ...] = COMPOSITION
) -> list[Conversation]:
    """The hard set's conversations (see the module docstring), in the order of ``composition``."""
    rng = random.Random(seed)
    voice = voices(speakers)
    by_gender = {g: sorted(s for s in speakers if voice[s].gender == g) for g in ("F", "M")}
    out: list[Conversation] = []
    for n_here, count in composition:
        for c in range(count):
            if n_here == 2:
                gender = (
                    "FM"[c % 2]
                    if min(len(v) for v in by_gender.values()) >= 2
                    else max(by_gender, key=lambda g: len(by_gender[g]))
                )
                chosen = rng.sample(by_gender[gender], 2)
            else:
                chosen = rng.sample(sorted(speakers), n_here)
            out.append(_conversation(f"hard{len(out):02d}-{n_here}spk", speakers, chosen, voice, rng))
    return out


def _conversation(
    name: str, speakers: dict[str, list[Piece]], chosen: list[str], voice: dict[str, Voice], rng: random.Random
) -> Conversation:
    usable = {s: speakers[s][:14] for s in chosen}  # the last 6 pieces: known-speaker references only
    shortest = {s: sorted(range(14), key=lambda k: int(np.diff(usable[s][k].sound)[0]))[:SHORT_PIECES] for s in chosen}
    queue = {s: [k for k in range(14) if k not in shortest[s]] for s in chosen}
    for s in chosen:
        rng.shuffle(queue[s])
    max_samples = (60.0 + 6.0 * len(chosen)) * SAMPLE_RATE
    placed: list[tuple[int, np.ndarray]] = []
    turns: list[Turn] = []
    texts: list[str] = []
    at = 0

    def place(pcm: np.ndarray, who: str, sound: tuple[int, int], text: str) -> None:
        nonlocal at
        placed.append((at, pcm))
        turns.append(Turn(who, (at + sound[0]) / SAMPLE_RATE, (at + sound[1]) / SAMPLE_RATE))
        texts.append(text)
        at += len(pcm)

    def long_turn(who: str) -> None:
        nonlocal at
        start = at
        target = rng.uniform(*LONG_TURN_S) * SAMPLE_RATE
        while queue[who] and at - start < target:
            piece = usable[who][queue[who].pop()]
            if at > start:
                at += int(rng.uniform(0.1, 0.3) * SAMPLE_RATE)
            place(piece.pcm, who, piece.sound, piece.text)

    def short_turn(who: str) -> None:
        nonlocal at
        piece = usable[who][rng.choice(shortest[who])]
        end = short_cut(piece, rng)
        start = max(0, piece.sound[0] - SAMPLE_RATE // 20)
        pcm = piece.pcm[start:end].copy()
        fade = min(len(pcm), SAMPLE_RATE // 100)
        pcm[-fade:] = (pcm[-fade:] * np.linspace(1, 0, fade)).astype(np.int16)
        words = [w for w, t in piece.words if t < end / SAMPLE_RATE]
        place(pcm, who, (piece.sound[0] - start, end - start), " ".join(words))

    prev: str | None = None
    n_short = 0
    held: set[str] = set()
    while True:
        options = [s for s in chosen if s != prev and queue[s]]
        if not options or at > max_samples:
            break
        # Who has not held a long turn goes first: a speaker heard only in a short reply would be a passer-by.
        unseen = [s for s in options if s not in held]
        who = rng.choice(unseen or options)
        if at:
            at += int(rng.uniform(0.2, 1.0) * SAMPLE_RATE)
        long_turn(who)
        held.add(who)
        prev = who
        due = n_short < MIN_SHORT_TURNS and at > max_samples * (n_short + 1) / (MIN_SHORT_TURNS + 2)
        if queue[who] and at < 0.9 * max_samples and (due or rng.random() < SHORT_TURN_CHANCE):
            # A short reply by another speaker, then the first one goes on.
            at += int(rng.uniform(0.3, 0.6) * SAMPLE_RATE)
            short_turn(rng.choice([s for s in chosen if s != who]))
            at += int(rng.uniform(0.3, 0.6) * SAMPLE_RATE)
            long_turn(who)
            n_short += 1
    mix = np.zeros(at, dtype=np.int32)
    for start, pcm in placed:
        mix[start : start + len(pcm)] += pcm
    conv = Conversation(
        name, np.clip(mix, -32768, 32767).astype(np.int16), turns, " ".join(t for t in texts if t), chosen
    )
    conv.voices = {s: voice[s] for s in chosen}
    conv.short_turns = n_short
    return conv
