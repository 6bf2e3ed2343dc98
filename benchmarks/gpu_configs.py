#!/usr/bin/env python3
"""Several configurations of the server side by side on one GPU, each load run on them in a mirrored order
(A B C C B A), so that a drifting host weighs on each alike (docs/gpu.md).

Every server starts at once, each with a JIT cache of its own; faster-whisper's BatchedInferencePipeline
(benchmarks/fw_batched_server.py: batch 16, 4 replicas) can be one of them, as `FW`. A load is one of:

- `long`, `short`: `voxlane bench serve` at 64 clients (/health probed every 20 ms from its own process), on the
  dev set's long files (60 s or more, 128 requests) or its short ones (30 s or less, 512 requests); WER and
  windows per audio hour come from its report; `dev`: each of the dev set's files once, 4 at a time;
- `liveN`: `voxlane bench realtime` at N streams (benchmarks/gpu_live.py's figures);
- `ttsN`: N speech streams of one paragraph at once, after a lone sentence's first audio five times
  (benchmarks/tts_bench.py's figures).

`--profile KEY,...` records the API process of those loads' server with py-spy (`--gil`, raw stacks, without
pausing it) for their first `--profile-s` seconds, into `profile-KEY.txt`.

    python benchmarks/gpu_configs.py --dataset DIR/manifest.jsonl \\
        --server D= --server W10="--audio-preprocess-workers 10" --server FW=fw \\
        --load long:D,W10,W10,D --load short:D,FW,D --load live64:D --load tts16:D \\
        --budget-s 400 --pack results.tgz
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from asr_bench import run_json, serve_load_args
from gpu_bench import GpuSampler, Server, gpu_name, guarded, run_loads, save_summary, start_all, stop_all
from gpu_live import live_load
from tts_bench import load_figures

from voxlane.bench.server import ServerProcess

HERE = Path(__file__).resolve().parent
SUBSETS = {
    "long": (["--min-duration-s", "60"], 128, 64),
    "short": (["--max-duration-s", "30"], 512, 64),
    "dev": ([], 20, 4),
}
"""A load's files (bench serve's duration flags), its number of requests and how many at once (`dev`: each
file once, at a load light enough for the decoding to stay at its most accurate)."""
LEVEL = 64
"""Threads of the faster-whisper server: the most requests at once."""


def load(base_url: str, dataset: str, subset: str, scale: float, result_dir: Path, name: str) -> dict[str, Any]:
    flags, n, level = SUBSETS[subset]
    sampler = GpuSampler()
    try:
        args = [*serve_load_args(base_url, dataset, flags, max(1, int(n * scale)), max(1, int(level * scale)))]
        r = run_json([*args, "--request-timeout-s", "600"], result_dir, name)
    finally:
        gpu = sampler.stop()
    windows = r.get("server_windows") or {}
    return {
        "completed": r["completed"],
        "failed": r["failed"],
        "errors": r["errors"][:2],
        "rtfx": round(r["rtfx"], 1),
        "e2e_s": {k: round(r["e2el_ms"][k] / 1000, 2) for k in ("p50", "p99")},
        "health_ms": {k: round(r["health"]["latency_ms"][k], 1) for k in ("p50", "p95", "p99", "max")},
        "wer": None if r["wer"] is None else round(100 * r["wer"], 2),
        "wer_errors": r.get("wer_errors"),
        "windows_per_audio_hour": windows.get("windows_per_audio_hour"),
        "gpu_util_mean": round(gpu["util_mean"], 1),
    }


def any_load(
    srv: ServerProcess, dataset: str, what: str, scale: float, result_dir: Path, name: str, profile: tuple[str, float]
) -> dict[str, Any]:
    """The load ``what`` (long, short, liveN, ttsN) on ``srv``, recorded with py-spy when ``name`` is one of
    ``profile``'s keys (comma-separated)."""
    spy = None
    if name in profile[0].split(",") and shutil.which("py-spy"):
        out = result_dir / f"profile-{name}.txt"
        # --nonblocking: the process is read, not paused, so that the load's /health figures stand.
        cmd = ["py-spy", "record", "--gil", "--nonblocking", "--format", "raw", "--rate", "200",
               "--duration", str(int(profile[1])),
               "--pid", str(srv.pid), "--output", str(out)]  # fmt: skip
        spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        if what.startswith("live"):
            return live_load(srv.base_url, dataset, int(what[4:]), result_dir, name)
        if what.startswith("tts"):
            return asyncio.run(load_figures(srv.base_url, int(what[3:])))
        return load(srv.base_url, dataset, what, scale, result_dir, name)
    finally:
        if spy is not None:
            spy.wait(timeout=profile[1] + 60)
        # The loop's stall histogram and the watchdog's causes so far (cumulative: a load's are the difference).
        with contextlib.suppress(OSError):
            metrics = urllib.request.urlopen(f"{srv.base_url}/metrics", timeout=10).read()
            (result_dir / f"metrics-{name}.txt").write_bytes(metrics)


def server_cmd(name: str, flags: str, device: str) -> Server:
    if flags == "fw":
        from voxlane.config import default_model_path

        fw_flags = [
            "--model",
            default_model_path(),
            "--batch-size",
            "16",
            "--workers",
            "4",
            "--device",
            device,
            "--compute-type",
            "float16" if device == "cuda" else "int8",
            "--threads",
            str(LEVEL),
        ]
        return fw_flags, [sys.executable, str(HERE / "fw_batched_server.py")]
    serve = ["--device", device, "--max-transcription-requests", "64"]
    return [*serve, "--cuda-cache-dir", f"/tmp/vx-jit-{name}", *shlex.split(flags)], None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--server", action="append", default=[], help="NAME=FLAGS (voxlane serve), or NAME=fw")
    parser.add_argument("--load", action="append", default=[], help="SUBSET:NAME,NAME,... (long or short)")
    parser.add_argument("--budget-s", type=float, default=400.0, help="start no load after this many seconds")
    parser.add_argument("--result-dir", default="results/gpu-configs")
    parser.add_argument("--pack", default="", help="after each load, tar the result dir to this file")
    parser.add_argument("--device", default="cuda", help="cpu: try this script on a machine without a GPU")
    parser.add_argument("--scale", type=float, default=1.0, help="scale requests and clients (0.1 to try it)")
    parser.add_argument(
        "--code", action="append", default=[], help="NAME=DIR: server NAME runs the voxlane of checkout DIR"
    )
    parser.add_argument("--profile", default="", help="loads' keys (LOAD-NAME-I,...) to record with py-spy")
    parser.add_argument("--profile-s", type=float, default=20.0, help="seconds of that recording")
    args = parser.parse_args()
    t0 = time.monotonic()
    result_dir = Path(args.result_dir).resolve()
    result_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"args": vars(args), "loads": {}}
    summary["gpu"] = gpu_name()

    def save() -> None:
        save_summary(result_dir, summary, args.pack)

    specs = dict(s.split("=", 1) for s in args.server)
    for name in specs:
        shutil.rmtree(f"/tmp/vx-jit-{name}", ignore_errors=True)
    cmds = {name: server_cmd(name, flags, args.device) for name, flags in specs.items()}
    code = {name: Path(d).resolve() for name, d in (c.split("=", 1) for c in args.code)}
    servers, ready_s = guarded(summary, "start", start_all, cmds, result_dir, code) or ({}, {})
    summary["ready_s"] = {name: round(s, 1) for name, s in ready_s.items()}
    print(f"ready: {summary['ready_s']}", file=sys.stderr)
    save()
    try:
        run_loads(
            args.load,
            servers,
            summary,
            t0 + args.budget_s,
            save,
            lambda what, srv, key: any_load(
                srv, args.dataset, what, args.scale, result_dir, key, (args.profile, args.profile_s)
            ),
        )
    finally:
        stop_all(servers)
        summary["elapsed_s"] = round(time.monotonic() - t0, 1)
        save()
    report(summary)
    return 0


def report(summary: dict[str, Any]) -> None:
    head = f"{'E2E p50/p99 s':>14} {'/health p50/p95/p99/max ms':>27} {'WER':>6} {'w/h':>5}"
    print(f"{'load':<16} {'RTFx':>7} {head}")
    for key, r in summary["loads"].items():
        if not isinstance(r, dict) or "rtfx" not in r:
            print(f"{key:<16} {json.dumps(r, default=str)[:400]}")
            continue
        h, e = r["health_ms"], r["e2e_s"]
        wph = r["windows_per_audio_hour"]
        print(
            f"{key:<16} {r['rtfx']:>7} {e['p50']:>6}/{e['p99']:<7} {h['p50']:>6}/{h['p95']}/{h['p99']}/{h['max']:<8} "
            f"{r['wer']!s:>6} {'' if wph is None else round(wph):>5} {r['failed'] or ''}"
        )


if __name__ == "__main__":
    sys.exit(main())
