#!/usr/bin/env python3
"""The GPU issue's second round in one run on a GPU machine (docs/gpu.md, "Second round"): two servers side
by side, A = the code in --base-code (main before the round), B = this checkout, both `--device cuda`.

Stages, in this order (each guarded: one that fails leaves the rest to run; a stage that would start past
--budget-s is skipped), results saved after each:
 1. both servers started at once, each with an empty CUDA JIT cache of its own: time to ready;
 2. live transcription, B then A, first thing after ready (a kernel compiled at first use shows as a slow
    first final): `voxlane bench realtime --streams 32` on the dev set's files of 30 s or less;
 3. long audio at 64 clients, A B B A (`voxlane bench serve`, /health probed every 20 ms from its own process);
 4. live transcription on B with 64 streams;
 5. the API process of A and then of B under the same load, profiled with py-spy (--gil) when it is there;
 6. B under load with word timestamps, then with sampled decodes (temperature 0.4: the fallback's path);
 7. what onnxruntime here could run Piper on (providers), for speech on the GPU.

    python benchmarks/gpu_frontend.py --dataset DIR/manifest.jsonl --base-code DIR_WITH_voxlane/ --budget-s 420
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from asr_bench import VOXLANE, free_port, run_json, serve_load_args, wait_ready
from gpu_bench import GpuSampler, gpu_name, guarded, save_summary, stop

HERE = Path(__file__).resolve().parent
LONG = ["--min-duration-s", "60"]


def start_both(cmds: dict[str, tuple[list[str], Path]], result_dir: Path) -> dict[str, Any]:
    """Start every server at once, each in its directory (``python -m`` puts the working directory first on
    the path: that is where ``voxlane`` comes from); wait for each; {name: (proc, base_url, seconds to ready)}."""
    t0 = time.monotonic()
    started = {}
    for name, (cmd, cwd) in cmds.items():
        port = free_port()
        log = open(result_dir / f"server-{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        started[name] = (proc, f"http://127.0.0.1:{port}")
    out = {}
    for name, (proc, base_url) in started.items():
        if not wait_ready(base_url, proc, timeout_s=300):
            proc.terminate()
            print(f"server {name} did not become ready", file=sys.stderr)
            continue
        out[name] = (proc, base_url, time.monotonic() - t0)
    return out


QUICK = {"streams": 1.0, "requests": 1.0}
"""--quick scales the loads down, to try the script on a small machine."""


def realtime(base_url: str, dataset: str, streams: int, result_dir: Path, name: str) -> dict[str, Any]:
    path = result_dir / name
    streams = max(1, int(streams * QUICK["streams"]))
    subprocess.run(
        [
            *VOXLANE,
            "bench",
            "realtime",
            "--base-url",
            base_url,
            "--dataset",
            dataset,
            "--streams",
            str(streams),
            "--settle-timeout-s",
            "60",
            "--save-result",
            str(path),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )
    return json.loads(path.read_text())


def load(base_url: str, dataset: str, result_dir: Path, name: str, n: int = 128, extra: str = "") -> dict[str, Any]:
    sampler = GpuSampler()
    n, level = max(1, int(n * QUICK["requests"])), max(1, int(64 * QUICK["requests"]))
    args = [*serve_load_args(base_url, dataset, LONG, n, level), "--request-timeout-s", "600"]
    if extra:
        args += ["--extra-body", extra]
    try:
        r = run_json(args, result_dir, name)
    finally:
        gpu = sampler.stop()
    return {
        "completed": r["completed"],
        "failed": r["failed"],
        "errors": r["errors"][:2],
        "rtfx": round(r["rtfx"], 1),
        "e2e_s": {k: round(r["e2el_ms"][k] / 1000, 2) for k in ("p50", "p99")},
        "health_ms": {k: round(r["health"]["latency_ms"][k], 1) for k in ("p50", "p95", "p99", "max")},
        "wer": None if r["wer"] is None else round(100 * r["wer"], 2),
        "gpu_util_mean": round(gpu["util_mean"], 1),
    }


def profiled(pid: int, base_url: str, dataset: str, result_dir: Path, tag: str) -> dict[str, Any]:
    """A load of 64 requests with py-spy recording the API process's GIL holder."""
    from frontend_load import gil_profile, summarise_gil

    with gil_profile(pid, result_dir / f"gil-{tag}.txt") as profiling:
        r = load(base_url, dataset, result_dir, f"profiled-{tag}.json", n=64)
    if profiling and (result_dir / f"gil-{tag}.txt").exists():
        r["gil"] = summarise_gil(result_dir / f"gil-{tag}.txt", top=15)
    return r


def providers() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", "import onnxruntime as o; print(o.__version__, o.get_available_providers())"],
        capture_output=True,
        text=True,
    )
    return {"onnxruntime": (out.stdout or out.stderr).strip()[-300:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--base-code", required=True, help="a directory holding main's voxlane/ package (server A)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no stage after this many seconds")
    parser.add_argument("--result-dir", default="results/gpu-frontend")
    parser.add_argument("--pack", default="", help="after each stage, tar the result dir to this file")
    parser.add_argument("--device", default="cuda", help="cpu: try this script on a machine without a GPU")
    parser.add_argument("--quick", action="store_true", help="an eighth of the streams and requests")
    parser.add_argument(
        "--stages", default="realtime,long,profile,extra", help="which stages after the start (default: all)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="A B B A rounds of the long audio")
    args = parser.parse_args()
    if args.quick:
        QUICK.update(streams=1 / 8, requests=1 / 8)
    t0 = time.monotonic()
    result_dir = Path(args.result_dir).resolve()
    result_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"args": vars(args), "stages": {}}
    summary["gpu"] = gpu_name()

    def save() -> None:
        save_summary(result_dir, summary, args.pack)

    def stage(name: str, fn: Any, *fn_args: Any) -> Any:
        if time.monotonic() - t0 > args.budget_s:
            summary["stages"][name] = "skipped: over --budget-s"
            print(f"{name}: skipped (budget)", file=sys.stderr)
            return None
        print(f"{name} ... ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
        began = time.monotonic()
        r = guarded(summary, name, fn, *fn_args)
        summary["stages"][name] = r if r is not None else "failed"
        summary.setdefault("seconds", {})[name] = round(time.monotonic() - began, 1)
        print(f"{name}: {json.dumps(r, default=str)[:700]}", file=sys.stderr)
        save()
        return r

    stage("providers", providers)
    serve = [*VOXLANE, "serve", "--device", args.device, "--log-level", "warning", "--realtime-max-connections", "64"]
    cmds = {
        "A": ([*serve, "--cuda-cache-dir", "/tmp/vx-jit-A"], Path(args.base_code).resolve()),
        "B": ([*serve, "--cuda-cache-dir", "/tmp/vx-jit-B"], HERE.parent),
    }
    for d in ("/tmp/vx-jit-A", "/tmp/vx-jit-B"):
        shutil.rmtree(d, ignore_errors=True)
    servers = stage("start", start_both, cmds, result_dir) or {}
    summary["ready_s"] = {name: round(s[2], 1) for name, s in servers.items()}
    url = {name: s[1] for name, s in servers.items()}
    stages = set(args.stages.split(","))
    try:
        for name in ("B", "A") if "realtime" in stages else ():
            if name in url:
                stage(f"realtime32-{name}", realtime, url[name], args.dataset, 32, result_dir, f"rt32-{name}.json")
        for i, name in enumerate("ABBA" * args.rounds if "long" in stages else ""):
            if name in url:
                stage(f"long64-{name}{i}", load, url[name], args.dataset, result_dir, f"long64-{name}{i}.json")
        if "B" in url and "realtime" in stages:
            stage("realtime64-B", realtime, url["B"], args.dataset, 64, result_dir, "rt64-B.json")
        for name in ("A", "B") if "profile" in stages else ():
            if name in url:
                pid = servers[name][0].pid
                stage(f"profiled-{name}", profiled, pid, url[name], args.dataset, result_dir, name)
        if "B" in url and "extra" in stages:
            words = '{"response_format": "verbose_json", "timestamp_granularities[]": ["word"]}'
            stage("words-B", load, url["B"], args.dataset, result_dir, "words-B.json", 128, words)
            stage("sampled-B", load, url["B"], args.dataset, result_dir, "sampled-B.json", 128, '{"temperature": 0.4}')
    finally:
        for proc, _, _ in servers.values():
            stop(proc)
        summary["elapsed_s"] = round(time.monotonic() - t0, 1)
        save()
    print(json.dumps({k: v for k, v in summary.items() if k != "args"}, indent=1, default=str)[-6000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
