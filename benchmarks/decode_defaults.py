#!/usr/bin/env python3
"""Choosing the decoder's defaults by a paired comparison over files (docs/asr-engine.md).

Each configuration is a `voxlane serve` with its own flags. For each concurrency level, each configuration
transcribes every file of the dataset once (`voxlane bench accuracy --systems server`),
in mirrored order (A B C ... C B A with --rounds 2: the host's speed drifts, so each configuration's
runs bracket the others'). Every run's JSON is kept; then each configuration is compared with the first,
file by file (`voxlane bench compare`: corpus WER, the paired bootstrap's 95% interval, the sign test), with
WER per subset when the manifest names subsets, RTFx per run and the windows each beam decoded.

    .venv/bin/python benchmarks/decode_defaults.py --dataset DEV_WIDE/manifest.jsonl --levels 4 \\
        --config main="--beam-size 1" --config beam5="--beam-size 5" --config beam5-30s="--beam-size 5 \\
        --short-window-pad-s 0"

A WER decision takes the runs of one level (reads do not depend on the level at one decode setting: a file
reads the same whatever its neighbours); a speed decision takes RTFx ratios within one round.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.asr_bench import VOXLANE  # noqa: E402
from voxlane.bench import paired  # noqa: E402
from voxlane.bench.server import ServerStartError, running_server  # noqa: E402


def run_config(name: str, flags: str, dataset: str, level: int, result_dir: Path, tag: str) -> dict:
    """One server with ``flags``, one pass over the dataset at ``level`` requests at once; the saved JSON."""
    log_path = result_dir / f"{tag}.log"
    try:
        with running_server(*shlex.split(flags), log_path=log_path, log_level=None, ready_timeout_s=300.0) as srv:
            url = srv.base_url
            cmd = [*VOXLANE, "bench", "accuracy", "--base-url", url, "--dataset", dataset, "--systems", "server",
                   "--max-concurrency", str(level), "--save-result", "--result-dir",
                   str(result_dir), "--result-filename", f"{tag}.json"]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{name}: bench accuracy failed:\n{done.stderr[-2000:]}")
            windows = httpx.get(url + "/metrics").text
    except ServerStartError as exc:
        raise SystemExit(f"{name}: {exc}") from exc
    result = json.loads((result_dir / f"{tag}.json").read_text())
    result["beams"] = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in windows.splitlines()
        if line.startswith("voxlane_windows_by_beam_total{")
    }
    (result_dir / f"{tag}.json").write_text(json.dumps(result, indent=1))
    return result


def rtfx(result: dict) -> float:
    """Audio seconds over the run's wall seconds, of a bench accuracy run."""
    return sum(row["duration_s"] for row in result["files"]) / result["wall_s"]["server"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="manifest (JSONL); its 'subset' field groups the table")
    parser.add_argument("--config", action="append", required=True, metavar='NAME="FLAGS"',
                        help="a configuration's name and voxlane serve flags; the first is the baseline")  # fmt: skip
    parser.add_argument("--levels", default="4", help="requests at once, comma-separated (default: 4)")
    parser.add_argument("--rounds", type=int, default=1, help="1: A B C; 2: A B C C B A (default: 1)")
    parser.add_argument("--result-dir", default="results/decode-defaults")
    args = parser.parse_args()
    configs = [c.split("=", 1) for c in args.config]
    result_dir = Path(args.result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    order = [c for r in range(args.rounds) for c in (configs if r % 2 == 0 else configs[::-1])]
    for level in (int(x) for x in args.levels.split(",")):
        runs: dict[str, list[str]] = {name: [] for name, _ in configs}
        for k, (name, flags) in enumerate(order):
            tag = f"c{level}-{name}-{k}"
            started = time.monotonic()
            result = run_config(name, flags, args.dataset, level, result_dir, tag)
            total = result["total"]["server"]
            p99 = (result.get("health_p99_ms") or {}).get("server", float("nan"))
            print(f"[{level} at once] {name}: WER {100 * total['wer']:.2f}% ({total['sub']}/{total['del']}/"
                  f"{total['ins']}), RTFx {rtfx(result):.1f}, /health p99 {p99:.1f} ms, windows by beam "
                  f"{result['beams']} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip
            runs[name].append(str(result_dir / f"{tag}.json"))
        base = configs[0][0]
        for name, _ in configs[1:]:
            c = paired.compare(paired.load_run(runs[base][0]), paired.load_run(runs[name][0]))
            print(f"[{level} at once] {paired.format_comparison(c, base, name)}")
        subset_of = paired.subsets(Path(args.dataset))
        table = [(name, paired.by_subset(paired.load_run(runs[name][0]), subset_of)) for name, _ in configs]
        print(paired.format_subsets(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
