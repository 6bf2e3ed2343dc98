"""The hard set of ``voxlane bench diarize --set hard`` (voxlane/bench/hard_conversations.py) on made-up
speakers: harmonic "words" at a known pitch, with pauses between them, so the set's promises can be checked
without the dev set: its counts, speakers per conversation, same-gender pairs by estimated pitch, and the
0.3-1 s replies between two turns of one other speaker."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from voxlane.bench.conversations import SAMPLE_RATE, Conversation, Piece, _sound
from voxlane.bench.hard_conversations import COMPOSITION, build_hard, voices

PITCH_HZ = {"m1": 105.0, "m2": 120.0, "m3": 135.0, "m4": 150.0, "f1": 185.0, "f2": 200.0, "f3": 215.0, "f4": 235.0}


def _piece(speaker: str, f0: float, rng: np.random.Generator) -> Piece:
    parts = [rng.normal(0, 20, int(0.2 * SAMPLE_RATE))]  # room noise before and after, as the dev set's
    words = []
    at = len(parts[0])
    for k in range(int(rng.integers(3, 12))):
        n = int(rng.uniform(0.2, 0.45) * SAMPLE_RATE)
        t = np.arange(n) / SAMPLE_RATE
        pitch = f0 * (1 + 0.03 * np.sin(2 * np.pi * 3 * t))
        phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
        voiced = sum(np.sin(h * phase) / h for h in (1, 2, 3)) * np.hanning(n) * 6000
        words.append((f"{speaker}w{k}", (at + n / 2) / SAMPLE_RATE))
        gap = rng.normal(0, 20, int(0.08 * SAMPLE_RATE))
        parts += [voiced, gap]
        at += n + len(gap)
    parts.append(rng.normal(0, 20, int(0.2 * SAMPLE_RATE)))
    pcm = np.clip(np.concatenate(parts), -32768, 32767).astype(np.int16)
    pcm[pcm == 0] = 1
    return Piece(speaker, pcm, _sound(pcm), " ".join(w for w, _ in words), words)


@pytest.fixture(scope="module")
def speakers() -> dict[str, list[Piece]]:
    rng = np.random.default_rng(3)
    return {s: [_piece(s, f0, rng) for _ in range(20)] for s, f0 in PITCH_HZ.items()}


@pytest.fixture(scope="module")
def convs(speakers) -> list[Conversation]:
    return build_hard(speakers, seed=0)


def test_hard_set_composition(speakers, convs) -> None:
    found = voices(speakers)
    assert {s: v.gender for s, v in found.items()} == {s: s[0].upper() for s in PITCH_HZ}
    assert all(abs(found[s].f0_hz - f0) < 0.08 * f0 for s, f0 in PITCH_HZ.items())
    assert len(convs) == sum(n for _, n in COMPOSITION) >= 20
    assert Counter(len(c.speakers) for c in convs) == dict(COMPOSITION)
    for c in convs:
        assert len(set(c.speakers)) == len(c.speakers)
        assert {t.speaker for t in c.turns} == set(c.speakers)  # everyone speaks
        assert set(c.voices) == set(c.speakers)
    pairs = [c for c in convs if len(c.speakers) == 2]
    assert all(len({c.voices[s].gender for s in c.speakers}) == 1 for c in pairs)
    assert {c.voices[c.speakers[0]].gender for c in pairs} == {"F", "M"}
    assert any(max(Counter(v.gender for v in c.voices.values()).values()) >= 3 for c in convs)
    again = build_hard(speakers, seed=0)
    assert all(np.array_equal(a.pcm, b.pcm) and a.turns == b.turns for a, b in zip(convs, again))
    assert not np.array_equal(build_hard(speakers, seed=1)[0].pcm, convs[0].pcm)


def _joined(c: Conversation) -> list[list]:
    """Pieces of one turn are separate entries: a speaker's consecutive entries joined into turns."""
    turns: list[list] = []
    for t in c.turns:
        if turns and turns[-1][0] == t.speaker:
            turns[-1][2] = t.end
        else:
            turns.append([t.speaker, t.start, t.end])
    return turns


def test_every_speaker_holds_a_long_turn(convs) -> None:
    """A speaker heard only in a short reply would be one no diarizer can count (a single 0.3-1 s embedding)."""
    for c in convs:
        held = {who for who, a, b in _joined(c) if b - a >= 1.5}
        assert held == set(c.speakers), c.name


def test_short_replies_between_turns_of_another_speaker(convs) -> None:
    for c in convs:
        turns = _joined(c)
        short = [k for k, (_, a, b) in enumerate(turns) if b - a < 1.0]
        assert len(short) == c.short_turns >= 2, c.name
        for k in short:
            who, a, b = turns[k]
            assert 0.3 <= b - a < 1.0
            assert 0 < k < len(turns) - 1 and turns[k - 1][0] == turns[k + 1][0] != who
            assert turns[k - 1][2] - turns[k - 1][1] >= 1.5 and turns[k + 1][2] - turns[k + 1][1] >= 1.5
            # the reply is its own sound: silence around it in the mix
            around = c.pcm[int((a - 0.25) * SAMPLE_RATE) : int((a - 0.05) * SAMPLE_RATE)]
            assert np.abs(around.astype(np.int64)).max() < 200
