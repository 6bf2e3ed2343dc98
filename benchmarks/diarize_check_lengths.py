"""How far apart the count check's encoder puts two voices, by the length of speech it hears: for each
conversation of a set, each speaker's turns joined, then its first L seconds against its last L seconds
(one voice) and against the first L seconds of each other speaker (two voices), embedded whole as the check
embeds a stretch (voxlane/speakers/features.py ``stretch_features``, CAM++). Prints, per L, the cosine's
spread for one voice and for two, and for the two closest pairs of the hard set's voices.

    python benchmarks/diarize_check_lengths.py --dev-dir DEV --set hard --seed 3
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
from diarize_rescore import conversations

from voxlane.runners.speaker import load_encoder
from voxlane.speakers.features import SAMPLE_RATE, stretch_features
from voxlane.speakers.weights import weights_path

CLOSE_PAIRS = [("0120", "2327"), ("1037", "2242")]
"""The hard set's voices that the clustering merges most often (docs/diarization.md)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev-dir", type=Path, required=True)
    parser.add_argument("--set", dest="set_name", choices=["default", "hard"], default="hard")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--lengths", type=float, nargs="+", default=[2.5, 4.0, 6.0, 8.0])
    args = parser.parse_args()
    encoder = load_encoder(weights_path("campplus"))

    def embed(pcm: np.ndarray) -> np.ndarray:
        features, spans = stretch_features([[pcm]])
        return encoder.embed_windows([(features, spans)])[0][0][0]

    same: dict[float, list[float]] = {length: [] for length in args.lengths}
    different: dict[float, list[tuple[tuple[str, ...], float]]] = {length: [] for length in args.lengths}
    for conv in conversations(args.dev_dir, args.set_name, args.seed):
        speech = {
            s: np.concatenate(
                [
                    conv.pcm[round(t.start * SAMPLE_RATE) : round(t.end * SAMPLE_RATE)]
                    for t in conv.turns
                    if t.speaker == s
                ]
            )
            for s in sorted({t.speaker for t in conv.turns})
        }
        for length in args.lengths:
            n = round(length * SAMPLE_RATE)
            heard = {s: (embed(x[:n]), embed(x[-n:])) for s, x in speech.items() if len(x) >= 2 * n}
            same[length] += [float(a @ b) for a, b in heard.values()]
            different[length] += [
                (tuple(sorted((s, t))), float(heard[s][0] @ heard[t][0])) for s, t in itertools.combinations(heard, 2)
            ]
    for length in args.lengths:
        one = np.array(same[length])
        two = np.array([c for _, c in different[length]])
        close = {pair: [round(c, 2) for p, c in different[length] if p == pair] for pair in CLOSE_PAIRS}
        print(
            f"{length:4.1f} s  one voice: {len(one)} pairs, min {one.min():.2f}, median {np.median(one):.2f}  "
            f"two voices: {len(two)} pairs, max {two.max():.2f}, 90th percentile {np.percentile(two, 90):.2f}  "
            + "  ".join(f"{a}-{b}: {v}" for (a, b), v in close.items())
        )


if __name__ == "__main__":
    main()
