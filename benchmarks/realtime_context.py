#!/usr/bin/env python3
"""The context of live finals (``--realtime-context-s``), compared file by file.

One server per value, in the order given (repeat the first at the end to see the run-to-run spread), each
streaming every file of the dataset at once over ``/v1/realtime`` at real time (``voxlane bench realtime``).
Each value's finals are then scored per file and compared with the first run's (the paired bootstrap and sign
test of ``voxlane bench compare``). Only files with several turns test the context: use long files.

    .venv/bin/python benchmarks/realtime_context.py --dataset LONG.jsonl --values 20,0,10,20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.asr_bench import VOXLANE  # noqa: E402
from voxlane.bench import paired  # noqa: E402
from voxlane.bench.server import running_server  # noqa: E402
from voxlane.bench.wer import score  # noqa: E402


def run_value(value: str, dataset: str, streams: int, out: Path, tag: str) -> dict:
    """One server at ``--realtime-context-s value``, one ``bench realtime`` pass; the saved figures."""
    with running_server("--realtime-context-s", value, log_path=out / f"{tag}.log", log_level=None,
                        ready_timeout_s=300.0) as srv:  # fmt: skip
        cmd = [*VOXLANE, "bench", "realtime", "--base-url", srv.base_url, "--dataset", dataset,
               "--streams", str(streams), "--min-duration-s", "30", "--max-duration-s", "3600",
               "--settle-timeout-s", "180", "--save-result", str(out / f"{tag}.json")]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"--realtime-context-s {value}: bench realtime failed:\n{done.stderr[-2000:]}")
    return json.loads((out / f"{tag}.json").read_text())


def file_scores(result: dict) -> dict[str, paired.FileScore]:
    scores = {}
    for s in result["per_stream"]:
        sc = score(s["reference"], s["final"])
        scores[s["file"]] = paired.FileScore(s["file"], sc.words, sc.sub, sc.dels, sc.ins)
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="manifest (JSONL) of files of over 30 s")
    parser.add_argument("--values", default="20,0,10,20", help="--realtime-context-s values, in run order")
    parser.add_argument("--streams", type=int, default=0, help="streams at once (default: one per file)")
    parser.add_argument("--result-dir", default="results/realtime-context")
    args = parser.parse_args()
    out = Path(args.result_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = sum(1 for line in Path(args.dataset).read_text().splitlines() if line.strip())
    runs = []
    for k, value in enumerate(args.values.split(",")):
        tag = f"{k}-context{value}"
        result = run_value(value, args.dataset, args.streams or files, out, tag)
        scores = file_scores(result)
        words, sub, dels, ins = (sum(getattr(s, f) for s in scores.values()) for f in ("words", "sub", "dels", "ins"))
        line = (f"--realtime-context-s {value} (run {k}): WER {100 * (sub + dels + ins) / words:.2f}% "
                f"({sub}/{dels}/{ins} of {words}), final text p50 {result['final_latency_ms']['p50']} ms "
                f"after the turn's end, /health p99 {result['health_ms']['p99']} ms")  # fmt: skip
        if runs:
            c = paired.compare(runs[0], scores)
            line += f"; against run 0: {paired.format_comparison(c, 'run 0', f'run {k}')}"
        print(line, flush=True)
        runs.append(scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
