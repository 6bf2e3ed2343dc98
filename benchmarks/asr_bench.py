#!/usr/bin/env python3
"""Transcription throughput of voxlane against the ceiling, in one run.

(a) the ceiling: the raw Whisper runner in this machine's best shape, no server (`voxlane bench engine`,
    every batch size in --batch-sizes, the best one counts), measured before AND after the server runs
    (the host's speed drifts: the ratio uses the mean of the two);
(b) `voxlane serve` at each concurrency level on the dev set's short utterances and on its long audio
    (`voxlane bench serve`), with
(c) /health probed every 20 ms on its own thread during (b).

Prints one table and writes every JSON to --result-dir.

    .venv/bin/python benchmarks/asr_bench.py --dataset DIR/manifest.jsonl     # concurrency 1,4,16
    .venv/bin/python benchmarks/asr_bench.py --dataset DIR/manifest.jsonl \\
        --server-args "--engine-workers 2 --engine-threads 1"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import httpx

from voxlane.bench.server import ServerStartError, running_server

VOXLANE = [sys.executable, "-m", "voxlane.cli"]
DATASET_HELP = "the dataset: a manifest.jsonl (audio, text, duration_s), e.g. the dev set's"


def run_json(args: list[str], result_dir: Path, name: str) -> dict:
    subprocess.run(
        VOXLANE + args + ["--save-result", "--result-dir", str(result_dir), "--result-filename", name],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads((result_dir / name).read_text())


def serve_load_args(base_url: str, dataset: str, subset: list[str], num_prompts: int, level: int) -> list[str]:
    """`voxlane bench serve` transcriptions of ``dataset`` (``subset``: its duration flags) at ``level``
    requests at once, /health probed every 20 ms."""
    return [
        "bench",
        "serve",
        "--backend",
        "openai-audio",
        "--base-url",
        base_url,
        "--model",
        "whisper-1",
        "--dataset",
        dataset,
        *subset,
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(level),
        "--probe-interval-ms",
        "20",
        "--ready-check-timeout-sec",
        "120",
    ]


def ceiling(
    dataset: str,
    subset: list[str],
    num_prompts: int,
    batch_sizes: str,
    engine_args: list[str],
    result_dir: Path,
    tag: str,
) -> dict:
    return run_json(
        [
            "bench",
            "engine",
            "--dataset",
            dataset,
            *subset,
            "--num-prompts",
            str(num_prompts),
            "--batch-sizes",
            batch_sizes,
            *engine_args,
        ],
        result_dir,
        f"engine-{tag}.json",
    )


def best_pass(engine_result: dict) -> dict:
    return next(p for p in engine_result["passes"] if p["batch_size"] == engine_result["best_batch_size"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help=DATASET_HELP)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--short-requests", type=int, default=48, help="requests per level on short utterances")
    parser.add_argument("--long-requests", type=int, default=4, help="requests per level on the long audio")
    parser.add_argument("--batch-sizes", default="1,4,8", help="batch sizes tried for the ceiling")
    parser.add_argument("--server-args", default="", help="extra flags for voxlane serve")
    parser.add_argument("--result-dir", default="results/asr-bench")
    args = parser.parse_args()
    result_dir = Path(args.result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    levels = [int(c) for c in args.concurrency.split(",")]
    server_args = shlex.split(args.server_args)
    # The ceiling runs the runner with the server's own model flags, so the two stay comparable.
    engine_args = []
    for flag in ("--model", "--compute-type", "--beam-size", "--split-search-s", "--engine-threads"):
        if flag in server_args:
            engine_args += [flag, server_args[server_args.index(flag) + 1]]
    subsets = {
        "short": (["--max-duration-s", "30"], args.short_requests),
        "long": (["--min-duration-s", "30"], args.long_requests),
    }

    print(f"host load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    ceilings: dict[str, list[dict]] = {name: [] for name in subsets}
    for name, (subset, n) in subsets.items():
        print(f"ceiling ({name}) ...", file=sys.stderr)
        ceilings[name].append(
            ceiling(args.dataset, subset, n, args.batch_sizes, engine_args, result_dir, f"{name}-before")
        )

    rows = []
    with running_server(*server_args, log_path=result_dir / "server.log", stop_timeout_s=10.0) as server:
        for name, (subset, n) in subsets.items():
            for level in levels:
                print(f"server ({name}, concurrency {level}) ...", file=sys.stderr)
                r = run_json(
                    serve_load_args(server.base_url, args.dataset, subset, max(n, level), level),
                    result_dir,
                    f"serve-{name}-c{level}.json",
                )
                rows.append((name, level, r))

    for name, (subset, n) in subsets.items():
        print(f"ceiling ({name}, again) ...", file=sys.stderr)
        ceilings[name].append(
            ceiling(args.dataset, subset, n, args.batch_sizes, engine_args, result_dir, f"{name}-after")
        )
    print(f"host load after: {os.getloadavg()[0]:.2f}", file=sys.stderr)

    print(f"server flags: {args.server_args or '(defaults)'}")
    print(
        f"{'audio':<6}{'setup':<22}{'RTFx':>7}{'/ceiling':>10}{'E2E p50 ms':>12}{'E2E p99 ms':>12}"
        f"{'health p50':>12}{'health p99':>12}{'health max':>12}{'WER':>8}"
    )
    for name in subsets:
        before, after = ceilings[name]
        mean = (before["rtfx"] + after["rtfx"]) / 2
        for c in (before, after):
            when = "before" if c is before else "after"
            print(
                f"{name:<6}{'ceiling b=' + str(c['best_batch_size']) + ' (' + when + ')':<22}{c['rtfx']:>7.1f}"
                f"{c['rtfx'] / mean:>10.2f}{'':>12}{'':>12}{'':>12}{'':>12}{'':>12}"
                f"{100 * best_pass(c)['wer']:>7.1f}%"
            )
        for row_name, level, r in rows:
            if row_name != name:
                continue
            h = r["health"]["latency_ms"]
            wer = "-" if r["wer"] is None else f"{100 * r['wer']:.1f}%"
            print(
                f"{name:<6}{'server c=' + str(level):<22}{r['rtfx']:>7.1f}{r['rtfx'] / mean:>10.2f}"
                f"{r['e2el_ms']['p50']:>12.0f}{r['e2el_ms']['p99']:>12.0f}{h['p50']:>12.1f}{h['p99']:>12.1f}"
                f"{h['max']:>12.1f}{wer:>8}"
            )
            if r["failed"]:
                print(f"      {r['failed']} failed: {r['errors'][:1]}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (subprocess.CalledProcessError, httpx.HTTPError, ServerStartError) as exc:
        print(f"asr_bench: {exc}", file=sys.stderr)
        sys.exit(1)
