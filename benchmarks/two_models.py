#!/usr/bin/env python3
"""Two Whisper models under load at once in one server, against each alone (issue 30).

Starts one ``voxlane serve --model A --model B`` on 127.0.0.1 and runs ``voxlane bench serve`` on the dev
set's short files, ``--clients`` requests at once per model, in A B B A order (the host's speed drifts):
each model alone, both together (two load generators at once), both together again, each alone again.
Together, a model's throughput is counted over the time both loads ran (the completions that ended while
the other model's load was still running), so the model that finishes first does not leave the other one
alone for its last requests. The bar: together, each model does at least 0.8x half of what it does alone.

    .venv/bin/python benchmarks/two_models.py --server-args "--engine-workers 2"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.asr_bench import DEFAULT_DATASET, VOXLANE, free_port, run_json, serve_load_args  # noqa: E402


def load(base_url: str, args: argparse.Namespace, model: str, prompts: int, result_dir: Path, name: str) -> dict:
    cli = serve_load_args(base_url, args.dataset, ["--max-duration-s", str(args.max_duration_s)], prompts, args.clients)
    cli[cli.index("--model") + 1] = model
    return run_json([*cli, "--save-detailed", "--num-warmups", "1", "--probe-health", "none"], result_dir, name)


def ends(result: dict) -> list[float]:
    """When each request that succeeded ended, on the host's monotonic clock (shared by the processes)."""
    return sorted(r["start_s"] + r["latency_s"] for r in result["requests"] if r["success"])


def alone_rate(result: dict) -> float:
    return result["completed"] / result["duration_s"]


def together_rates(a: dict, b: dict) -> tuple[float, float, float]:
    """Each model's completions per second while both loads ran, and that overlap in seconds."""
    start = max(min(r["start_s"] for r in res["requests"]) for res in (a, b))
    stop = min(ends(a)[-1], ends(b)[-1])
    span = stop - start
    return (
        sum(start <= t <= stop for t in ends(a)) / span,
        sum(start <= t <= stop for t in ends(b)) / span,
        span,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="whisper-tiny.en,whisper-base", help="two models, comma-separated")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--max-duration-s", type=float, default=10.0, help="only files this short")
    parser.add_argument("--clients", type=int, default=8, help="requests at once per model")
    parser.add_argument(
        "--prompts",
        default="192,48",
        help="requests per model and run (alone; twice that together), comma-separated; fewer count the slower "
        "model's completions in too few bursts (docs/models.md)",
    )
    parser.add_argument("--server-args", default="", help="extra flags for voxlane serve")
    parser.add_argument("--result-dir", default="results/two-models")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the server too
    models = args.models.split(",")
    prompts = dict(zip(models, (int(p) for p in args.prompts.split(","))))
    result_dir = Path(args.result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    flags = [f for m in models for f in ("--model", m)] + shlex.split(args.server_args)
    print(f"host load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    alone: dict[str, list[float]] = {m: [] for m in models}
    together: dict[str, list[float]] = {m: [] for m in models}
    with open(result_dir / "server.log", "wb") as log:
        server = subprocess.Popen(
            [*VOXLANE, "serve", "--port", str(port), "--log-level", "info", *flags], stdout=log, stderr=log
        )
        try:
            for phase, step in enumerate(("alone", "together", "together", "alone")):
                print(f"{step} ({phase + 1}/4) ...", file=sys.stderr)
                if step == "alone":
                    for m in models:
                        r = load(base_url, args, m, prompts[m], result_dir, f"{phase}-alone-{m}.json")
                        alone[m].append(alone_rate(r))
                    continue
                with ThreadPoolExecutor(2) as pool:
                    futures = [
                        pool.submit(load, base_url, args, m, 2 * prompts[m], result_dir, f"{phase}-together-{m}.json")
                        for m in models
                    ]
                    a, b = (f.result() for f in futures)
                rate_a, rate_b, span = together_rates(a, b)
                together[models[0]].append(rate_a)
                together[models[1]].append(rate_b)
                print(f"  overlap {span:.1f} s", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(30)
    print(f"host load after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(f"server flags: {' '.join(flags)}; {args.clients} clients per model; files <= {args.max_duration_s:g} s")
    print(f"{'model':<18}{'alone req/s':>22}{'together req/s':>22}{'together / (alone / 2)':>26}")
    met = True
    for m in models:
        mean_alone = sum(alone[m]) / len(alone[m])
        mean_together = sum(together[m]) / len(together[m])
        ratio = mean_together / (mean_alone / 2)
        met = met and ratio >= 0.8
        a_runs = " ".join(f"{x:.2f}" for x in alone[m])
        t_runs = " ".join(f"{x:.2f}" for x in together[m])
        print(f"{m:<18}{a_runs:>22}{t_runs:>22}{ratio:>26.2f}")
    print(f"bar (each >= 0.80): {'met' if met else 'missed'}")
    summary = {"server_flags": flags, "clients": args.clients, "alone_rps": alone, "together_rps": together}
    (result_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
