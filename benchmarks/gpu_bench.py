#!/usr/bin/env python3
"""voxlane on a GPU against faster-whisper's BatchedInferencePipeline and the raw CTranslate2 ceiling, in one run
(`make bench-gpu`; docs/gpu.md).

(a) ceiling: CTranslate2 alone on the GPU (encode + greedy generate with the runner's options) over the dev
    set's real 30 s windows, features pre-computed: on the host (copied each batch, as the server's are) and
    already on the GPU; every batch size in --batch-sizes, 1 and --workers replicas; the best counts;
(b) cold start: `voxlane serve --device cuda` to /health 200 with an empty CUDA JIT cache, then again with it;
(c) `voxlane serve --device cuda` at each --concurrency on the long and the short audio (`voxlane bench
    serve`, /health probed every 20 ms), GPU utilisation sampled by nvidia-smi;
(d) the same load on benchmarks/fw_batched_server.py (BatchedInferencePipeline, batch 16, same replicas);
(e) WER of (c) and (d) from the same runs, and `voxlane bench accuracy` (the server against plain sequential
    faster-whisper on the CPU) with --accuracy.

Prints one table; every JSON and log goes to --result-dir.

    .venv/bin/python benchmarks/gpu_bench.py --dataset ../shared/data/dev/manifest.jsonl
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from asr_bench import run_json, serve_load_args

from voxlane.bench.server import ServerProcess, ServerStartError

HERE = Path(__file__).resolve().parent


# --- (a) the ceiling -------------------------------------------------------------------------------------


def dataset_windows(dataset: str, min_duration_s: float) -> tuple[np.ndarray, float]:
    """Every 30 s window (log-mel, as the server computes it) of the dataset's audio at least
    ``min_duration_s`` long, and the seconds of audio they hold."""
    from voxlane.audio.pipeline import decode_and_split, window_features
    from voxlane.bench.datasets import load_audio_dataset

    feats, audio_s = [], 0.0
    for sample in load_audio_dataset(dataset, min_duration_s=min_duration_s):
        for w in decode_and_split(sample.data, 7200.0, 8.0).windows:
            features, _, _ = window_features(w.pcm, 80, w.offset_s, w.speech)
            feats.append(features)
            audio_s += w.duration_s
    return np.stack(feats), audio_s


def ceiling(
    model_path: str,
    windows: np.ndarray,
    audio_s: float,
    batch_sizes: list[int],
    workers: list[int],
    device: str,
    n_windows: int,
) -> list:
    import ctranslate2
    from faster_whisper.tokenizer import Tokenizer
    from tokenizers import Tokenizer as HfTokenizer

    from voxlane.runners.cuda import place

    placement = place(device, "auto")
    on = ctranslate2.Device.cuda if placement.device == "cuda" else ctranslate2.Device.cpu
    prompt = list(
        Tokenizer(
            HfTokenizer.from_file(str(Path(model_path) / "tokenizer.json")), False, "transcribe", "en"
        ).sot_sequence
    )
    per_window_s = audio_s / len(windows)
    rows = []
    for n_workers in workers:
        model = ctranslate2.models.Whisper(
            model_path,
            device=placement.device,
            compute_type=placement.compute_type,
            inter_threads=n_workers,
            intra_threads=1,
        )
        for where in ("host", "gpu"):
            for size in batch_sizes:
                batches = []
                for k in range(max(2 * n_workers, n_windows // size)):
                    idx = [(k * size + j) % len(windows) for j in range(size)]
                    view = ctranslate2.StorageView.from_array(np.ascontiguousarray(windows[idx]))
                    batches.append(view.to_device(on) if where == "gpu" else view)

                def run(share: list[Any], model: Any = model, size: int = size) -> None:
                    for view in share:
                        enc = model.encode(view)
                        model.generate(
                            enc,
                            [prompt] * size,
                            beam_size=1,
                            max_length=448,
                            return_scores=True,
                            return_no_speech_prob=True,
                            suppress_blank=True,
                            suppress_tokens=[-1],
                            max_initial_timestamp_index=50,
                        )

                run(batches[:n_workers])  # warm-up: cuBLAS picks its algorithms for this shape
                shares = [batches[i::n_workers] for i in range(n_workers)]
                t0 = time.perf_counter()
                threads = [threading.Thread(target=run, args=(s,)) for s in shares]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.perf_counter() - t0
                n = sum(len(s) for s in shares) * size
                rows.append(
                    {
                        "workers": n_workers,
                        "features": where,
                        "batch_size": size,
                        "windows_per_s": n / wall,
                        "rtfx": n * per_window_s / wall,
                    }
                )
                print(
                    f"  ceiling workers={n_workers} features={where} batch={size}: {n / wall:.0f} windows/s",
                    file=sys.stderr,
                )
        del model
    return rows


# --- (b)-(d) servers ------------------------------------------------------------------------------------


class GpuSampler:
    """nvidia-smi's GPU utilisation every 100 ms while it runs."""

    def __init__(self) -> None:
        self.proc = None
        if not shutil.which("nvidia-smi"):
            return
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-lms", "100"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def stop(self) -> dict[str, float]:
        if self.proc is None:
            return {"util_mean": float("nan"), "mem_max_mib": float("nan")}
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        rows = [[float(x) for x in line.split(",")] for line in out.splitlines() if line.count(",") == 1]
        if not rows:
            return {"util_mean": float("nan"), "mem_max_mib": float("nan")}
        util = [r[0] for r in rows]
        return {"util_mean": sum(util) / len(util), "util_max": max(util), "mem_max_mib": max(r[1] for r in rows)}


Server = tuple[list[str], list[str] | None]
"""A server to start: ``voxlane serve`` flags and None, or a program (benchmarks/fw_batched_server.py) and its
flags."""


def start(server: Server, log_path: Path, timeout_s: float = 600.0) -> tuple[ServerProcess, float]:
    """A ready server from the repository root (``python -m`` puts the working directory first on the path:
    that is where ``voxlane`` comes from), and the seconds it took to answer /health 200."""
    flags, command = server
    srv = ServerProcess(*flags, log_path=log_path, command=command, cwd=HERE.parent)
    try:
        return srv, srv.wait_ready(timeout_s)
    except ServerStartError:
        srv.stop()
        raise


def start_all(
    servers: dict[str, Server], result_dir: Path, code: dict[str, Path] | None = None
) -> tuple[dict[str, ServerProcess], dict[str, float]]:
    """Every server started at once, each logging to ``server-NAME.log``, from the repository root or from
    ``code[NAME]`` (another checkout, whose ``voxlane`` it then runs); those ready within 300 s, and the
    seconds each took. A server that does not start is left out."""
    code = code or {}
    started = {
        name: ServerProcess(
            *flags, log_path=result_dir / f"server-{name}.log", command=command, cwd=code.get(name, HERE.parent)
        )
        for name, (flags, command) in servers.items()
    }
    ready, ready_s = {}, {}
    for name, srv in started.items():
        try:
            ready_s[name] = srv.wait_ready(300.0)
            ready[name] = srv
        except ServerStartError as exc:
            srv.stop()
            print(f"server {name} did not become ready: {str(exc).splitlines()[0]}", file=sys.stderr)
    return ready, ready_s


def stop_all(servers: dict[str, ServerProcess]) -> None:
    for srv in servers.values():
        srv.stop(timeout_s=30.0)


def load(base_url: str, dataset: str, subset: list[str], level: int, n: int, result_dir: Path, name: str) -> dict:
    sampler = GpuSampler()
    try:
        r = run_json(
            [*serve_load_args(base_url, dataset, subset, n, level), "--request-timeout-s", "1200"],
            result_dir,
            name,
        )
    finally:
        r_gpu = sampler.stop()
    r["gpu"] = r_gpu
    return r


def gpu_name() -> str:
    """nvidia-smi's name, driver and memory of the GPU, or "" on a machine without one."""
    smi = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    return subprocess.run(smi, capture_output=True, text=True).stdout.strip() if shutil.which(smi[0]) else ""


def save_summary(result_dir: Path, summary: dict[str, Any], pack: str) -> None:
    """``summary.json`` in ``result_dir``; with ``pack``, the whole directory tarred to that file too (what
    comes back from a device run whose command may be cut off)."""
    (result_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    if pack:
        subprocess.run(["tar", "czf", pack, "-C", str(result_dir.parent), result_dir.name], check=False)


def run_loads(
    specs: list[str],
    servers: dict[str, ServerProcess],
    summary: dict[str, Any],
    deadline_s: float,
    save: Any,
    run: Any,
) -> None:
    """Each load of ``specs`` (``WHAT:NAME,NAME,...``) on the servers named, in that order: ``run(WHAT,
    server, key)`` gives a load's figures, kept in ``summary["loads"][key]`` and saved after each. A server
    that did not start, or a load due after ``deadline_s`` (time.monotonic), is noted instead."""
    for spec in specs:
        what, names = spec.split(":")
        for i, name in enumerate(names.split(",")):
            key = f"{what}-{name}-{i}"
            if name not in servers:
                summary["loads"][key] = "no server"
                continue
            if time.monotonic() > deadline_s:
                summary["loads"][key] = "skipped: over --budget-s"
                continue
            began = time.monotonic()
            r = guarded(summary, key, run, what, servers[name], key)
            summary["loads"][key] = r if r is not None else "failed"
            print(f"{key} ({time.monotonic() - began:.0f} s): {json.dumps(r, default=str)[:600]}", file=sys.stderr)
            save()


def guarded(summary: dict[str, Any], step: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None with the error kept in the summary: one step failing leaves the others to run."""
    try:
        return fn(*args)
    except Exception as exc:
        print(f"{step} failed: {exc!r}", file=sys.stderr)
        summary.setdefault("errors", []).append(f"{step}: {exc!r}")
        return None


def cold_start(serve: list[str], result_dir: Path, cache: Path) -> list[dict[str, Any]]:
    shutil.rmtree(cache, ignore_errors=True)
    starts = []
    for attempt in ("empty JIT cache", "JIT cache kept"):
        srv, ready_s = start((serve, None), result_dir / "cold-start.log")
        srv.stop(timeout_s=30.0)
        size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
        starts.append({"cache": attempt, "ready_s": ready_s, "cache_mb": size / 1e6})
        print(f"  start to ready, {attempt}: {ready_s:.1f} s (cache {size / 1e6:.0f} MB)", file=sys.stderr)
    return starts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--model", default="whisper-tiny.en", help="as voxlane serve --model")
    parser.add_argument("--concurrency", default="1,16,64,256")
    parser.add_argument("--requests", type=int, default=256, help="most requests per level (at least the level)")
    parser.add_argument("--batch-sizes", default="16,64,128")
    parser.add_argument("--ceiling-windows", type=int, default=1024, help="windows decoded per ceiling variant")
    parser.add_argument("--workers", type=int, default=4, help="model replicas of all three (inter_threads)")
    parser.add_argument("--server-args", default="", help="more flags for voxlane serve")
    parser.add_argument(
        "--server-args-b", default="", help="flags of a second voxlane server, measured as 'voxlane (B)'"
    )
    parser.add_argument("--fw-batch-size", type=int, default=16)
    parser.add_argument("--audio", default="long,short", help="which audio: long (60 s or more), short (30 s or less)")
    parser.add_argument("--skip", default="", help="comma-separated steps to skip: ceiling,cold,voxlane,fw,accuracy")
    parser.add_argument("--result-dir", default="results/gpu-bench")
    parser.add_argument("--device", default="cuda", help="cpu runs the same steps on the CPU (to try this script)")
    args = parser.parse_args()
    result_dir = Path(args.result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    from voxlane.config import DEFAULT_MODEL_NAME, default_model_path

    model_path = str(default_model_path()) if args.model == DEFAULT_MODEL_NAME else args.model
    levels = [int(c) for c in args.concurrency.split(",")]
    subsets = {
        name: subset
        for name, subset in {"long": ["--min-duration-s", "60"], "short": ["--max-duration-s", "30"]}.items()
        if name in args.audio.split(",")
    }
    summary: dict[str, Any] = {"args": vars(args)}
    summary["nvidia_smi"] = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if shutil.which("nvidia-smi")
        else "no nvidia-smi"
    )

    def save() -> None:
        (result_dir / "summary.json").write_text(json.dumps(summary, indent=2))

    if "ceiling" not in skip:
        print("ceiling ...", file=sys.stderr)
        windows, audio_s = dataset_windows(args.dataset, 60.0)
        summary["ceiling"] = (
            guarded(
                summary,
                "ceiling",
                ceiling,
                model_path,
                windows,
                audio_s,
                [int(b) for b in args.batch_sizes.split(",")],
                sorted({1, args.workers}),
                args.device,
                args.ceiling_windows,
            )
            or []
        )
        save()

    cache = Path(tempfile.gettempdir()) / "voxlane-gpu-bench-jit"
    serve = [
        "--device",
        args.device,
        "--model",
        args.model,
        "--engine-workers",
        str(args.workers),
        "--cuda-cache-dir",
        str(cache),
    ]
    if "cold" not in skip:
        summary["cold_start"] = guarded(summary, "cold start", cold_start, serve, result_dir, cache) or []
        save()

    servers: dict[str, Server] = {
        "voxlane": ([*serve, *shlex.split(args.server_args)], None),
        **({"voxlane (B)": ([*serve, *shlex.split(args.server_args_b)], None)} if args.server_args_b else {}),
        "faster-whisper batched": (
            [
                "--model",
                model_path,
                "--batch-size",
                str(args.fw_batch_size),
                "--workers",
                str(args.workers),
                "--device",
                args.device,
                "--compute-type",
                "float16" if args.device == "cuda" else "int8",
                "--threads",
                str(max(levels)),
            ],
            [sys.executable, str(HERE / "fw_batched_server.py")],
        ),
    }
    summary["runs"] = []
    for server, spec in servers.items():
        if ("voxlane" if server.startswith("voxlane") else "fw") in skip:
            continue
        started = guarded(summary, server, start, spec, result_dir / f"{server.replace(' ', '-')}.log")
        if started is None:
            continue
        srv, _ = started
        base_url = srv.base_url
        try:
            if server == "voxlane" and "accuracy" not in skip:  # the first configuration only
                summary["accuracy"] = guarded(
                    summary,
                    "accuracy",
                    run_json,
                    ["bench", "accuracy", "--base-url", base_url, "--dataset", args.dataset, "--threads", "8"],
                    result_dir,
                    "accuracy.json",
                )
            for name, subset in subsets.items():
                for level in levels:
                    print(f"{server} ({name}, concurrency {level}) ...", file=sys.stderr)
                    n = max(level, min(args.requests, 2 * level))
                    r = guarded(
                        summary,
                        f"{server} {name} c{level}",
                        load,
                        base_url,
                        args.dataset,
                        subset,
                        level,
                        n,
                        result_dir,
                        f"{server.replace(' ', '-')}-{name}-c{level}.json",
                    )
                    if r is None:
                        continue
                    summary["runs"].append({"server": server, "audio": name, "level": level, "result": r})
                    save()
        finally:
            srv.stop(timeout_s=30.0)
    report(summary)
    save()
    return 0


def report(summary: dict[str, Any]) -> None:
    print(f"GPU: {summary['nvidia_smi']}")
    best = None
    for row in summary.get("ceiling", []):
        print(
            f"ceiling  workers {row['workers']}  features on {row['features']:<4}  batch {row['batch_size']:>4}: "
            f"{row['windows_per_s']:7.0f} windows/s  RTFx {row['rtfx']:8.0f}"
        )
        best = row if best is None or row["rtfx"] > best["rtfx"] else best
    for s in summary.get("cold_start", []):
        print(f"start to ready ({s['cache']}): {s['ready_s']:.1f} s, cache {s['cache_mb']:.0f} MB")
    print(
        f"{'server':<24}{'audio':<7}{'conc':>5}{'done':>6}{'RTFx':>9}{'/ceiling':>9}{'E2E p50':>9}{'E2E p99':>9}"
        f"{'health p99':>11}{'GPU %':>7}{'WER':>7}"
    )
    for run in summary.get("runs", []):
        r = run["result"]
        if not r["completed"]:
            print(f"{run['server']:<24}{run['audio']:<7}{run['level']:>5}: all {r['failed']} failed: {r['errors'][:1]}")
            continue
        h = r["health"]["latency_ms"] if r.get("health") else {"p99": float("nan")}
        share = r["rtfx"] / best["rtfx"] if best and run["audio"] == "long" else float("nan")
        wer = "-" if r.get("wer") is None else f"{100 * r['wer']:.2f}"
        print(
            f"{run['server']:<24}{run['audio']:<7}{run['level']:>5}{r['completed']:>6}{r['rtfx']:>9.0f}"
            f"{share:>9.2f}{r['e2el_ms']['p50'] / 1000:>8.2f}s{r['e2el_ms']['p99'] / 1000:>8.2f}s"
            f"{h['p99']:>10.1f}m{r['gpu']['util_mean']:>7.0f}{wer:>7}"
        )
        if r["failed"]:
            print(f"      {r['failed']} failed: {r['errors'][:1]}")
    acc = summary.get("accuracy")
    if acc:
        print("accuracy (bench accuracy):", json.dumps({k: v for k, v in acc.items() if not isinstance(v, list)})[:600])


if __name__ == "__main__":
    sys.exit(main())
