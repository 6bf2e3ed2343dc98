"""Is the load generator a bottleneck? Run ``voxlane bench serve`` at concurrency 64 against the trivial
server and compare the CPU time each side spends per request.

    python benchmarks/generator_overhead.py [--num-prompts 3000] [--backend openai-audio]

Prints one line per side. The generator's CPU is its event-loop thread's (``client.cpu_s`` in the JSON);
the server's is read from /proc for the server process, over the same run (Linux only).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEV_MANIFEST = HERE.parent.parent / "shared" / "data" / "dev" / "manifest.jsonl"


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="openai-audio", choices=["openai-audio", "openai-audio-speech"])
    parser.add_argument("--num-prompts", type=int, default=3000)
    parser.add_argument("--max-concurrency", type=int, default=64)
    parser.add_argument("--dataset", default=str(DEV_MANIFEST))
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, str(HERE / "trivial_server.py"), "--port", str(port)])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "voxlane.cli",
                "bench",
                "serve",
                "--backend",
                args.backend,
                "--base-url",
                f"http://127.0.0.1:{port}",
                "--num-prompts",
                str(args.num_prompts),
                "--max-concurrency",
                str(args.max_concurrency),
                "--ready-check-timeout-sec",
                "30",
                "--probe-health",
                "none",
                "--result-dir",
                tmp,
                "--result-filename",
                "r.json",
            ]
            if args.backend == "openai-audio":
                cmd += ["--dataset", args.dataset, "--max-duration-s", "30"]
            # the server's CPU is sampled around the whole bench process; the warm-up and setup are cheap
            before = cpu_s(server.pid)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            server_cpu = cpu_s(server.pid) - before
            r = json.loads((Path(tmp) / "r.json").read_text())
    finally:
        server.terminate()
        server.wait(10)
    n, wall, client = r["completed"] + r["failed"], r["duration_s"], r["client"]["cpu_s"]
    print(
        f"{args.backend}, concurrency {args.max_concurrency}, {n} requests ({r['failed']} failed) "
        f"in {wall:.2f} s = {r['request_throughput']:.0f} req/s"
    )
    print(f"generator: {1000 * client / n:.3f} ms CPU per request, {100 * client / wall:.0f}% of one core")
    print(
        f"server:    {1000 * server_cpu / n:.3f} ms CPU per request, {100 * server_cpu / wall:.0f}% of one core "
        "(includes its warm-up and idle time around the run)"
    )
    print(f"E2E latency p50 {r['e2el_ms']['median']:.1f} ms, p99 {r['e2el_ms']['p99']:.1f} ms")


if __name__ == "__main__":
    main()
