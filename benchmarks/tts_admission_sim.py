"""The speech scheduler on a fake clock: the 16 paragraphs as streams that arrive together, on 2 slots.

No server, no model: each unit costs ``s_per_id`` seconds per phoneme id on a slot (times a lognormal
factor of sigma ``--noise``) and gives 28 ms of audio per id (Piper joe-medium; about 2 ids per character),
and ``TtsScheduler`` decides what runs, as in the engine. Prints, per unit size (``--clause-chars``) and
cost headroom, the time to first audio of the median and the last stream (the p99 of 16) and how many
streams ever ran dry, over ``--seeds`` runs. This is how the levers of issue 11's second round were
compared before the machine measured the chosen ones (docs/tts.md, "Issue 11, second round").

    .venv/bin/python benchmarks/tts_admission_sim.py [--streams 16] [--seeds 20] [--noise 0.3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voxlane.bench.tts_sim import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.3, help="sigma of the lognormal cost factor")
    parser.add_argument("--clause-chars", type=int, nargs="+", default=[300, 100, 80, 60])
    parser.add_argument("--headroom", type=float, nargs="+", default=[1.25, 1.15])
    parser.add_argument(
        "--s-per-id", type=float, nargs="+", default=[0.0024, 0.0021], help="slot seconds per phoneme id"
    )
    args = parser.parse_args()
    print(f"{args.streams} streams, 2 slots, {args.seeds} seeds, cost noise sigma {args.noise}")
    print("| clause chars | headroom | s per id | TTFP p50 s (median) | last TTFP s, median (worst) | streams dry |")
    print("|---:|---:|---:|---:|---:|---:|")
    for clause_chars in args.clause_chars:
        for headroom in args.headroom:
            for s_per_id in args.s_per_id:
                runs = [
                    simulate(
                        args.streams,
                        2,
                        s_per_id,
                        clause_chars=clause_chars,
                        noise=args.noise,
                        seed=seed,
                        cost_headroom=headroom,
                    )
                    for seed in range(args.seeds)
                ]
                p50 = statistics.median(statistics.median(r[0]) for r in runs)
                last = [max(r[0]) for r in runs]
                dry = sum(r[1] for r in runs)
                print(
                    f"| {clause_chars} | {headroom} | {s_per_id} | {p50:.2f} | "
                    f"{statistics.median(last):.2f} ({max(last):.2f}) | {dry} of {args.streams * args.seeds} |"
                )


if __name__ == "__main__":
    main()
