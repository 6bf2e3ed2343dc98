#!/usr/bin/env python3
"""Live transcription on one GPU with configurations side by side (docs/asr-engine.md):
`voxlane bench realtime` at N streams on the dev set's files of 30 s or less, each load run on the servers
in the order given (A B B A), every server started at once with a JIT cache of its own.

A load's figures are bench realtime's (final latency after speech_stopped, delta latency, partials a second
while speaking, WER of the finals and of the batch endpoint, /health), and the engine's batches of the run
from `/metrics` (`voxlane_engine_batch_size_windows`: batches and windows, so live decodes per batch; the
bench's batch-endpoint pass for WER adds its few windows).

    python benchmarks/gpu_live.py --dataset DIR/manifest.jsonl \\
        --server L1="--live-batch-size 1" --server D= --load 64:L1,D,D,L1 --load 128:D,L1 --pack out.tgz
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from asr_bench import VOXLANE
from gpu_bench import GpuSampler, Server, gpu_name, guarded, run_loads, save_summary, start_all, stop_all


def realtime(base_url: str, dataset: str, streams: int, result_dir: Path, name: str) -> dict[str, Any]:
    """`voxlane bench realtime` at ``streams`` streams; its saved figures."""
    path = result_dir / name
    cmd = [*VOXLANE, "bench", "realtime", "--base-url", base_url, "--dataset", dataset, "--streams", str(streams),
           "--settle-timeout-s", "60", "--save-result", str(path)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=300)
    return json.loads(path.read_text())


def batches(base_url: str) -> tuple[float, float]:
    """(batches, windows) the engine has run so far, from /metrics."""
    text = urllib.request.urlopen(f"{base_url}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        for name in ("voxlane_engine_batch_size_windows_count", "voxlane_engine_batch_size_windows_sum"):
            if line.startswith(name + " "):
                values[name] = float(line.split()[1])
    return values.get("voxlane_engine_batch_size_windows_count", 0.0), values.get(
        "voxlane_engine_batch_size_windows_sum", 0.0
    )


def live_load(base_url: str, dataset: str, streams: int, result_dir: Path, name: str) -> dict[str, Any]:
    before = batches(base_url)
    sampler = GpuSampler()
    try:
        r = realtime(base_url, dataset, streams, result_dir, f"{name}.json")
    finally:
        gpu = sampler.stop()
    time.sleep(1.5)  # the engine's stats arrive once a second
    after = batches(base_url)
    n_batches, n_windows = after[0] - before[0], after[1] - before[1]
    return {
        "final_ms": r["final_latency_ms"],
        "delta_ms": {k: r["delta_latency_ms"][k] for k in ("p50", "p95")},
        "partials_per_s": r["partials_per_s_while_speaking"],
        "wer_finals": r["wer_finals"],
        "wer_batch": r["wer_batch_endpoint"],
        "health_ms": {k: r["health_ms"].get(k) for k in ("p50", "p99", "max")},
        "errors": r["errors"][:3],
        "batches": n_batches,
        "windows_per_batch": round(n_windows / n_batches, 2) if n_batches else None,
        "gpu_util_mean": round(gpu["util_mean"], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--server", action="append", default=[], help="NAME=FLAGS (voxlane serve)")
    parser.add_argument("--load", action="append", default=[], help="STREAMS:NAME,NAME,...")
    parser.add_argument("--budget-s", type=float, default=400.0, help="start no load after this many seconds")
    parser.add_argument("--result-dir", default="results/gpu-live")
    parser.add_argument("--pack", default="", help="after each load, tar the result dir to this file")
    parser.add_argument("--device", default="cuda", help="cpu: try this script on a machine without a GPU")
    args = parser.parse_args()
    t0 = time.monotonic()
    result_dir = Path(args.result_dir).resolve()
    result_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"args": vars(args), "gpu": gpu_name(), "loads": {}}
    specs = dict(s.split("=", 1) for s in args.server)
    cmds: dict[str, Server] = {}
    for name, flags in specs.items():
        shutil.rmtree(f"/tmp/vx-jit-{name}", ignore_errors=True)
        serve = ["--device", args.device, "--cuda-cache-dir", f"/tmp/vx-jit-{name}"]
        cmds[name] = ([*serve, *shlex.split(flags)], None)
    servers, ready_s = guarded(summary, "start", start_all, cmds, result_dir) or ({}, {})
    summary["ready_s"] = {name: round(s, 1) for name, s in ready_s.items()}
    print(f"ready: {summary['ready_s']}", file=sys.stderr)
    save_summary(result_dir, summary, args.pack)
    try:
        run_loads(
            args.load,
            servers,
            summary,
            t0 + args.budget_s,
            lambda: save_summary(result_dir, summary, args.pack),
            lambda streams, srv, key: live_load(srv.base_url, args.dataset, int(streams), result_dir, key),
        )
    finally:
        stop_all(servers)
        summary["elapsed_s"] = round(time.monotonic() - t0, 1)
        save_summary(result_dir, summary, args.pack)
    for key, r in summary["loads"].items():
        print(key, json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
