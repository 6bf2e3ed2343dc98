#!/usr/bin/env python3
"""The API process under a GPU's request rate, on any machine: where does its event loop wait?

On a GPU the engine answers long audio at RTFx 1000+, so the API process (upload parse, decode, log-mel,
the pool's transfers, ZMQ) carries ten or more long requests a second, and /health's tail is the front
end's. On a CPU-only host the engine is the bottleneck and hides the front end. This script starts
`voxlane serve` with its Whisper runner paced like a GPU (each batch of n windows sleeps
n / (--windows-per-s / engine workers) seconds and answers one segment a window, no text), drives it with
`voxlane bench serve` on the long audio with /health probed every 20 ms, and with --profile records the API
process with py-spy (`--gil`: only the thread holding the GIL is sampled, so the profile says who keeps the
loop waiting).

    .venv/bin/python benchmarks/frontend_load.py --concurrency 64 --requests 128 --profile
    .venv/bin/python benchmarks/frontend_load.py --server-args "--audio-preprocess-pool thread"
    .venv/bin/python benchmarks/frontend_load.py --base-code /tmp/main   # `git archive main voxlane` unpacked there

The pacing is installed at import of this file, so it holds in the engine process too (spawned
processes import the parent's main script as __mp_main__); the rest of the server is the real one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_PACE_ENV = "VOXLANE_BENCH_WINDOWS_PER_S"  # read only by this bench script, in the engine process it spawns


class PacedRunner:
    """The engine's Whisper runner replaced by a sleep: one segment per window, ``per_replica_s`` seconds
    per window of the batch."""

    def __init__(self, real: Any, per_window_s: float) -> None:
        self.is_multilingual = real.is_multilingual
        self.n_mels = real.n_mels
        self.per_window_s = per_window_s

    def run(self, batch: Sequence[Any]) -> list[Any]:
        from voxlane.messages import Segment, WindowResult
        from voxlane.runners.base import WindowOutput

        time.sleep(self.per_window_s * len(batch))
        out = []
        for w in batch:
            m = w.msg
            seg = Segment(m.offset_s, m.offset_s + m.duration_s, " paced", [], -0.2, 1.2, 0.01, 0.0)
            out.append(WindowOutput(WindowResult(w.request_id, m.index, "en", [seg])))
        return out


def _install_pacing() -> None:
    windows_per_s = float(os.environ.get(_PACE_ENV, "0") or 0)
    if windows_per_s <= 0:
        return
    from voxlane.engine import proc

    load = proc._load_runners

    def paced(config: Any) -> tuple[Any, list[Any], Any]:
        runner, tts, solo = load(config)
        return PacedRunner(runner, config.engine_workers / windows_per_s), tts, solo

    proc._load_runners = paced


_install_pacing()


@contextlib.contextmanager
def gil_profile(pid: int, path: Path, enabled: bool = True) -> Iterator[bool]:
    """py-spy recording, while the block runs, which thread of process ``pid`` holds the GIL (raw stacks
    to ``path``, 200 samples a second, without stopping the process); yields whether it records (py-spy
    may be missing)."""
    spy = None
    if enabled and shutil.which("py-spy"):
        spy = subprocess.Popen(
            ["py-spy", "record", "--gil", "--threads", "--rate", "200", "--format", "raw", "--nonblocking",
             "-o", str(path), "--pid", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        yield spy is not None
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)


def main() -> int:
    from asr_bench import free_port, run_json, serve_load_args

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(HERE.parent.parent / "shared/data/dev/manifest.jsonl"))
    parser.add_argument("--min-duration-s", type=float, default=30.0, help="the long audio by default")
    parser.add_argument("--windows-per-s", type=float, default=76.0, help="the paced engine's rate (H100: 76)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--server-args", default="", help="extra flags for voxlane serve")
    parser.add_argument("--profile", action="store_true", help="py-spy record --gil on the API process")
    parser.add_argument("--result-dir", default="results/frontend-load")
    parser.add_argument("--tag", default="run")
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument("--base-code", default="", help="serve the voxlane package in this directory instead")
    args = parser.parse_args()
    out = Path(args.result_dir)
    out.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, _PACE_ENV: str(args.windows_per_s)}
    if args.base_code:  # ahead of the installed (editable) package; the load generator stays this checkout's
        env["PYTHONPATH"] = f"{Path(args.base_code).resolve()}:{env.get('PYTHONPATH', '')}"
    serve = [sys.executable, str(Path(__file__).resolve()), "serve"]
    cmd = [*serve, "--port", str(port), "--log-level", "warning", *shlex.split(args.server_args)]
    with open(out / f"{args.tag}-server.log", "wb") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            subset = ["--min-duration-s", str(args.min_duration_s)]
            # one untimed round first: the server is ready and warm before the profile starts
            run_json(serve_load_args(base_url, args.dataset, subset, 4, 4), out, f"{args.tag}-warm.json")
            load = serve_load_args(base_url, args.dataset, subset, args.requests, args.concurrency)
            with gil_profile(server.pid, out / f"{args.tag}-gil.txt", args.profile) as profiling:
                r = run_json(load, out, f"{args.tag}.json")
        finally:
            server.terminate()
            server.wait(30)
    h = r["health"]["latency_ms"]
    print(
        json.dumps(
            {
                "tag": args.tag,
                "server_args": args.server_args,
                "completed": r["completed"],
                "failed": r["failed"],
                "rtfx": round(r["rtfx"], 1),
                "health_ms": {k: round(h[k], 1) for k in ("p50", "p95", "p99", "max")},
            }
        )
    )
    if profiling:
        print(summarise_gil(out / f"{args.tag}-gil.txt"))
    return 0


def summarise_gil(path: Path, top: int = 25) -> str:
    """The GIL holder's samples by thread and by innermost voxlane/starlette/stdlib frame."""
    by_thread: dict[str, int] = {}
    by_frame: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        by_thread[frames[0]] = by_thread.get(frames[0], 0) + n
        leaf = frames[-1]
        by_frame[leaf] = by_frame.get(leaf, 0) + n
    lines = [f"GIL samples: {total}"]
    lines += [f"  {n:6d} {100 * n / total:5.1f}%  {t}" for t, n in sorted(by_thread.items(), key=lambda x: -x[1])]
    lines += ["innermost frames:"]
    lines += [f"  {n:6d} {100 * n / total:5.1f}%  {f}" for f, n in sorted(by_frame.items(), key=lambda x: -x[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        from voxlane.cli import main as voxlane_main

        sys.exit(voxlane_main(sys.argv[1:]))
    sys.exit(main())
