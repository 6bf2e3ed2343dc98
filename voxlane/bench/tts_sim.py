"""Speech units of many streams on a fake clock: ``TtsScheduler`` decides what runs, as in the engine.

No server, no model: each unit costs ``s_per_id`` seconds per phoneme id on a slot (times a lognormal
factor of sigma ``noise``) and gives 28 ms of audio per id (Piper joe-medium; about 2 ids per character).
Used by the scheduler's unit tests.
"""

from __future__ import annotations

import heapq
import random

from voxlane.bench.paragraphs import PARAGRAPHS
from voxlane.engine.scheduler_tts import COST_HEADROOM, TtsScheduler, UnitWork
from voxlane.messages import SpeechUnit
from voxlane.text.normalise import normalise
from voxlane.text.sentences import CLAUSE_CHARS, split_units

AUDIO_PER_ID_S = 0.028


def simulate(
    streams: int,
    slots: int,
    s_per_id: float = 0.0024,
    clause_chars: int = CLAUSE_CHARS,
    noise: float = 0.0,
    seed: int = 0,
    cost_headroom: float = COST_HEADROOM,
) -> tuple[list[float], int]:
    """The 16 paragraphs (cycled) as ``streams`` streams arriving together, units as the server splits
    them, on ``slots`` parallel slots with a fake clock: Piper's cost and audio per phoneme id on one core
    of this machine, quiet (2.4 ms and 28 ms per id; about 2 ids per character), each unit's cost times a
    lognormal factor of sigma ``noise``. Returns each stream's time to first audio and the number of
    streams whose player (starting at the first unit, playing in real time) ever ran dry."""
    rng = random.Random(seed)
    s = TtsScheduler("deadline", cost_headroom)
    s.slots = slots
    for n in range(streams):
        units = split_units(normalise(PARAGRAPHS[n % len(PARAGRAPHS)]), clause_chars=clause_chars)
        for i, text in enumerate(units):
            ids = [1] * (2 * len(text))
            s.add(UnitWork(SpeechUnit(f"s{n}", i, i == len(units) - 1, "m", "c", ids, 1.0, 0.667, 0.8)), now=0.0)
    running: list[tuple[float, int, UnitWork]] = []
    deliveries: dict[str, list[tuple[float, float]]] = {}
    t, seq = 0.0, 0
    while True:
        while len(running) < slots and (work := s.next_unit(t)) is not None:
            cost = len(work.msg.phoneme_ids) * s_per_id * (rng.lognormvariate(0.0, noise) if noise else 1.0)
            heapq.heappush(running, (t + cost, seq, work))
            seq += 1
        if not running:
            break
        t, _, work = heapq.heappop(running)
        audio_s = len(work.msg.phoneme_ids) * AUDIO_PER_ID_S
        s.done(work.request_id, audio_s, t, last=work.msg.last)
        deliveries.setdefault(work.request_id, []).append((t, audio_s))
    ttfp = [d[0][0] for d in deliveries.values()]
    dry = 0
    for d in deliveries.values():
        runs_dry = d[0][0]
        for arrival, audio_s in d:
            if arrival > runs_dry + 1e-9:
                dry += 1
                break
            runs_dry += audio_s
    return ttfp, dry
