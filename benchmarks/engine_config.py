#!/usr/bin/env python3
"""Server configurations side by side: a fresh `voxlane serve` per configuration and round, then
`voxlane bench serve` on each workload against it. Configurations alternate within a round and the
rounds reverse the order (A B, B A, ...): the host's speed drifts, so read the ratios within a round.

    .venv/bin/python benchmarks/engine_config.py --rounds 2 --dataset DEV/manifest.jsonl \\
        --config "--engine-keep-freed-memory off" --config ""

Workloads (--workload, repeatable; default all three): ``short-c1`` (the dev set's clips under 20 s, one
client, 12 requests), ``short-c16`` (the same, 16 clients, 48 requests), ``long-c1`` (its files over 60 s,
one client, 6 requests). Prints RTFx and the mean and p99 end-to-end latency of each run.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from asr_bench import DATASET_HELP, run_json

from voxlane.bench.server import running_server

WORKLOADS = {
    "short-c1": ["--max-duration-s", "20", "--max-concurrency", "1", "--num-prompts", "12"],
    "short-c16": ["--max-duration-s", "20", "--max-concurrency", "16", "--num-prompts", "48"],
    "long-c1": ["--min-duration-s", "60", "--max-concurrency", "1", "--num-prompts", "6"],
}


def run_config(server_args: str, workloads: list[str], dataset: str, result_dir: Path, tag: str) -> list[dict]:
    log_path = result_dir / f"server-{tag}.log"
    with running_server(*shlex.split(server_args), log_path=log_path, stop_timeout_s=30.0) as server:
        results = []
        for name in workloads:
            args = ["bench", "serve", "--base-url", server.base_url, "--dataset", dataset, "--num-warmups", "1"]
            results.append(run_json([*args, *WORKLOADS[name]], result_dir, f"{tag}-{name}.json"))
        return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append", required=True, help="voxlane serve flags ('' = defaults)")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="default: all")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dataset", required=True, help=DATASET_HELP)
    parser.add_argument("--result-dir", default=None, help="where the JSON results go (default: a temp dir)")
    args = parser.parse_args()
    workloads = args.workload or list(WORKLOADS)
    result_dir = Path(args.result_dir or tempfile.mkdtemp(prefix="engine-config-"))
    result_dir.mkdir(parents=True, exist_ok=True)
    print(f"{'round':>5}  {'config':32} {'workload':10} {'RTFx':>7} {'E2E mean ms':>12} {'E2E p99 ms':>11}")
    for r in range(args.rounds):
        order = list(enumerate(args.config))
        for i, config in order if r % 2 == 0 else reversed(order):
            for name, res in zip(workloads, run_config(config, workloads, args.dataset, result_dir, f"r{r}-c{i}")):
                e2e = res["e2el_ms"]
                print(
                    f"{r:>5}  {config or '(defaults)':32} {name:10} {res['rtfx']:7.2f} {e2e['mean']:12.1f} "
                    f"{e2e['p99']:11.1f}",
                    flush=True,
                )
    print(f"results: {result_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
