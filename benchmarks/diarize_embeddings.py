"""Speaker encoders and clustering thresholds compared offline on the hard set (voxlane/bench/hard_conversations.py),
without a server or Whisper: each conversation is cut into 30 s windows, each window's speech regions are
embedded as the server does (speakers/features.py, the engine's encoder), clustered (speakers/diarize.py
``cluster``) and each region given its cluster; DER (bench/diarize.py ``der``, 0.25 s collar) is scored on
those regions. The server assigns Whisper's words instead, so its DER differs a little; the ranking of
encoders and thresholds is what this is for.

    python benchmarks/diarize_embeddings.py --dev-dir DEV --seed 1 --grid            # tune
    python benchmarks/diarize_embeddings.py --dev-dir DEV --seed 0 \\
        --pair ge2e:0.65:0.8 campplus:0.45:0.55                                       # compare, paired
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from voxlane.bench.conversations import SAMPLE_RATE, Conversation, load_pieces
from voxlane.bench.diarize import der
from voxlane.bench.hard_conversations import build_hard
from voxlane.runners.speaker import load_encoder
from voxlane.speakers.diarize import MIN_POINTS, cluster
from voxlane.speakers.features import window_speaker_features
from voxlane.speakers.weights import weights_path

WINDOW_S = 30


def embed(conv: Conversation, encoder: object) -> tuple[list[tuple[float, float]], np.ndarray, np.ndarray, float]:
    """(regions in seconds, embeddings, partial weights, CPU seconds of the encoder) of one conversation."""
    regions: list[tuple[float, float]] = []
    vectors, weights = [], []
    cpu = 0.0
    step = WINDOW_S * SAMPLE_RATE
    for start in range(0, len(conv.pcm), step):
        features, spans, _ = window_speaker_features(conv.pcm[start : start + step])
        if not spans:
            continue
        t = time.process_time()
        emb, counts = encoder.embed_windows([(features, spans)])[0]  # type: ignore[attr-defined]
        cpu += time.process_time() - t
        regions += [(start / SAMPLE_RATE + a / 100, start / SAMPLE_RATE + b / 100) for a, b in spans]
        vectors.append(emb)
        weights += counts
    return regions, np.concatenate(vectors), np.array(weights, dtype=np.float64), cpu


def score(conv: Conversation, data: tuple, threshold: float, merge: float) -> tuple[dict[str, float], int]:
    regions, embeddings, weights, _ = data
    labels, _ = cluster(embeddings, threshold, merge, MIN_POINTS, weights)
    segments = [{"start": a, "end": b, "speaker": str(k)} for (a, b), k in zip(regions, labels)]
    return der(conv, segments), len(set(labels.tolist()))


def bootstrap(diff: np.ndarray, draws: int = 10_000, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), (draws, len(diff)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encoders", nargs="+", default=["ge2e", "campplus"], help="names or .npz paths")
    parser.add_argument("--grid", action="store_true", help="DER and count right per threshold pair")
    parser.add_argument("--pair", nargs=2, metavar="ENCODER:THRESHOLD:MERGE", help="paired per-conversation DER")
    args = parser.parse_args()
    convs = build_hard(load_pieces(args.dev_dir), args.seed)
    minutes = sum(c.duration_s for c in convs) / 60
    names = [p.split(":")[0] for p in args.pair] if args.pair else args.encoders
    data = {}
    for name in names:
        encoder = load_encoder(weights_path(name))
        data[name] = [embed(c, encoder) for c in convs]
        print(f"{name}: encoder CPU {sum(d[3] for d in data[name]) / minutes:.2f} s per audio minute", flush=True)
    if args.grid:
        for name in names:
            for threshold in np.arange(0.2, 0.86, 0.05):
                for merge in np.arange(threshold, 0.91, 0.05):
                    results = [score(c, d, threshold, merge) for c, d in zip(convs, data[name])]
                    ders = [r[0]["der"] for r in results]
                    right = sum(r[1] == len(c.speakers) for r, c in zip(results, convs))
                    print(
                        f"{name} {threshold:.2f} {merge:.2f}  mean DER {np.mean(ders):.1%}  worst {max(ders):.1%}  "
                        f"count right {right}/{len(convs)}",
                        flush=True,
                    )
    if args.pair:
        rows = []
        for spec in args.pair:
            name, threshold, merge = spec.split(":")
            rows.append([score(c, d, float(threshold), float(merge)) for c, d in zip(convs, data[name])])
        a = np.array([r[0]["der"] for r in rows[0]])
        b = np.array([r[0]["der"] for r in rows[1]])
        for c, ra, rb in zip(convs, rows[0], rows[1]):
            print(f"{c.name:16s} {len(c.speakers)} spk  {ra[0]['der']:6.1%} ({ra[1]})  {rb[0]['der']:6.1%} ({rb[1]})")
        lo, hi = bootstrap(b - a)
        for spec, r, d in ((args.pair[0], rows[0], a), (args.pair[1], rows[1], b)):
            right = sum(x[1] == len(c.speakers) for x, c in zip(r, convs))
            missed = np.mean([x[0]["missed"] for x in r])
            print(f"{spec}: mean DER {d.mean():.1%}, worst {d.max():.1%}, count right {right}/{len(convs)}, "
                  f"missed {missed:.1%}")  # fmt: skip
        print(f"mean difference (second - first) {np.mean(b - a):+.1%}, 95% bootstrap interval [{lo:+.1%}, {hi:+.1%}]")


if __name__ == "__main__":
    main()
