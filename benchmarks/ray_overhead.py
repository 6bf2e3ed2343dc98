#!/usr/bin/env python3
"""The Ray path against ``voxlane serve``, in one run on one machine: throughput and latency at
``--concurrency`` (``voxlane bench serve`` on ``--dataset``), then the recovery from a replica killed with
SIGKILL. Writes the figures to ``--out`` and prints them.

Order: direct, Ray with 1 replica, Ray with 1 replica, direct (ABBA: a drift of the shared host falls
on both), then Ray with 2 replicas, direct, direct, Ray with 2 replicas. Every server is on 127.0.0.1; the
Ray cluster is a local head on 127.0.0.1 (voxlane/bench/ray_cluster.py ``RayCluster``), stopped at the end.

    .venv/bin/python benchmarks/ray_overhead.py --dataset DIR/manifest.jsonl --out docs/bench-results/ray
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voxlane.bench.ray_cluster import RayCluster
from voxlane.bench.server import ServerProcess

ENGINE = "VoxlaneEngine"


def bench(base_url: str, name: str, args: argparse.Namespace) -> dict[str, float]:
    out = Path(args.out)
    subprocess.run(
        [sys.executable, "-m", "voxlane.cli", "bench", "serve", "--base-url", base_url,
         "--dataset", args.dataset, "--num-prompts", str(args.num_prompts),
         "--max-concurrency", str(args.concurrency), "--save-result", "--result-dir", str(out),
         "--result-filename", f"{name}.json"],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    result = json.loads((out / f"{name}.json").read_text())
    print(name, {k: result.get(k) for k in args.fields}, flush=True)
    return result


def ray_server(cluster: RayCluster, replicas: int, cpus: str) -> ServerProcess:
    srv = ServerProcess(
        "--ray-address", cluster.address, "--replicas", str(replicas), "--cpus-per-replica", cpus,
        env=cluster.RAY_LOOPBACK,
    )  # fmt: skip
    srv.wait_ready(300)
    return srv


def serve_status(cluster: RayCluster) -> dict[str, int]:
    """Replica states of the engine deployment, from Ray Serve's controller (a short-lived driver)."""
    code = (
        "import ray, json; from ray import serve; "
        f"ray.init(address='{cluster.address}', _node_ip_address='127.0.0.1', log_to_driver=False); "
        "d = serve.status().applications['voxlane'].deployments['VoxlaneEngine']; "
        "print(json.dumps({str(k.value if hasattr(k, 'value') else k): v for k, v in d.replica_states.items()}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=cluster.env, capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}


def kill_recovery(cluster: RayCluster, srv: ServerProcess) -> dict[str, float]:
    """Kill one of two replicas while idle; time until a new replica process exists and until Ray Serve
    says both replicas run (the new one has loaded its models)."""
    pids = cluster.replica_pids(ENGINE)
    os.kill(pids[0], signal.SIGKILL)
    killed = time.monotonic()
    figures: dict[str, float] = {}
    while time.monotonic() - killed < 180:
        now = cluster.replica_pids(ENGINE)
        if "new_process_s" not in figures and len(now) == 2 and pids[0] not in now:
            figures["new_process_s"] = time.monotonic() - killed
        if "new_process_s" in figures and serve_status(cluster).get("RUNNING") == 2:
            figures["serving_again_s"] = time.monotonic() - killed
            break
        time.sleep(0.5)
    print("replica kill:", figures, flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="the dataset: a manifest.jsonl (audio, text, duration_s)")
    parser.add_argument("--out", default="/tmp/ray-overhead")
    parser.add_argument("--num-prompts", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--direct-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable for the direct server only, e.g. OMP_NUM_THREADS=2 (what Ray sets in its workers)",
    )
    parser.add_argument("--skip-two-replicas", action="store_true", help="only direct against 1 replica, and no kill")
    args = parser.parse_args()
    args.fields = ["completed", "failed", "duration_s", "request_throughput", "rtfx", "wer", "e2el_ms"]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    figures: dict[str, object] = {"order": []}
    direct = ServerProcess(env=dict(kv.split("=", 1) for kv in args.direct_env))
    figures["direct_env"] = args.direct_env
    cluster = RayCluster(num_cpus=4)
    try:
        direct.wait_ready(300)
        ray1 = ray_server(cluster, 1, "2")
        for name, srv in (("direct-1", direct), ("ray1-1", ray1), ("ray1-2", ray1), ("direct-2", direct)):
            figures[name] = bench(srv.base_url, name, args)
        ray1.stop(timeout_s=60)
        if args.skip_two_replicas:
            return
        ray2 = ray_server(cluster, 2, "1")
        for name, srv in (("ray2-1", ray2), ("direct-3", direct), ("direct-4", direct), ("ray2-2", ray2)):
            figures[name] = bench(srv.base_url, name, args)
        figures["kill"] = kill_recovery(cluster, ray2)
        ray2.stop(timeout_s=60)
    finally:
        direct.stop()
        figures["ray_processes_left"] = cluster.stop()
        (Path(args.out) / "summary.json").write_text(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
