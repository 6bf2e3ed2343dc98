#!/usr/bin/env python3
"""Thread pool or process pool for audio preprocessing? Measured, not guessed.

Runs the API process's real preprocessing path (``Executors.run`` -> decode + split, then log-mel per
window) for N concurrent uploads of the dev set (a mix of mp3, opus, flac, 48 kHz stereo wav and the
154 s file), on an event loop with the server's stall probe, for each pool kind, alternating kinds over
several rounds (the host drifts). Prints wall time, uploads per second and the loop's largest stall.

    .venv/bin/python benchmarks/preprocess_pool.py --uploads 16,32 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from voxlane.audio.pipeline import decode_and_split, window_features
from voxlane.config import EngineConfig, ServerConfig
from voxlane.server.executors import Executors
from voxlane.server.loopmon import LoopStallMonitor

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT.parent / "shared" / "data" / "dev" / "manifest.jsonl"


async def one_upload(executors: Executors, data: bytes) -> int:
    split = await executors.run("audio", decode_and_split, data, 3 * 3600.0, 8.0)
    for w in split.windows:
        await executors.run("audio", window_features, w.pcm, 80, w.offset_s, w.speech)
    return len(split.windows)


async def measure(kind: str, workers: int, uploads: list[bytes]) -> tuple[float, float]:
    executors = Executors(
        ServerConfig(audio_preprocess_workers=workers, audio_preprocess_pool=kind, engine=EngineConfig(model_path=""))
    )
    try:
        await asyncio.gather(*(one_upload(executors, d) for d in uploads[:workers]))  # warm the workers
        monitor = LoopStallMonitor(interval_s=0.002)
        probe = asyncio.create_task(monitor.run())
        start = time.perf_counter()
        await asyncio.gather(*(one_upload(executors, d) for d in uploads))
        wall = time.perf_counter() - start
        probe.cancel()
        return wall, monitor.max_stall_s
    finally:
        executors.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--uploads", default="16,32")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(args.dataset).parent
    files = [
        (base / json.loads(line)["audio"]).read_bytes()
        for line in Path(args.dataset).read_text().splitlines()
        if line.strip()
    ]
    print(f"{'pool':<9}{'uploads':>8}{'wall s (median)':>17}{'uploads/s':>11}{'max loop stall ms':>19}")
    for n in (int(x) for x in args.uploads.split(",")):
        uploads = [files[i % len(files)] for i in range(n)]
        results: dict[str, list[tuple[float, float]]] = {"thread": [], "process": []}
        for _ in range(args.rounds):
            for kind in results:
                results[kind].append(asyncio.run(measure(kind, args.workers, uploads)))
        for kind, runs in results.items():
            wall = statistics.median(w for w, _ in runs)
            stall = max(s for _, s in runs)
            print(f"{kind:<9}{n:>8}{wall:>17.3f}{n / wall:>11.1f}{stall * 1000:>19.1f}")


if __name__ == "__main__":
    main()
