#!/usr/bin/env python3
"""How long does a full garbage collection hold the GIL in the API process, with and without the
startup heap frozen (``voxlane.heap.freeze_startup_heap``, which ``voxlane serve`` calls)?

Builds the real API process state in this process (``build_app`` and its lifespan: executors, voice
registry, the engine client and its engine child on the default models), runs one speech text through
the text path so the phonemiser is loaded, then alternates, over several rounds (the host drifts):
unfrozen (``gc.unfreeze()``), time ``gc.collect()``; frozen again, time ``gc.collect()``. ``--busy N``
adds N busy-looping processes, as a loaded host would have.

    .venv/bin/python benchmarks/gc_pause.py --rounds 5 --busy 0
    .venv/bin/python benchmarks/gc_pause.py --rounds 5 --busy 3
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import statistics
import tempfile
import time

from voxlane.config import EngineConfig, ServerConfig, default_model_path, default_voice_paths
from voxlane.server.app import build_app
from voxlane.text.phonemes import prepare


def _spin() -> None:
    while True:
        pass


def _timed_collect() -> float:
    start = time.perf_counter()
    gc.collect()
    return time.perf_counter() - start


async def main(rounds: int, busy: int) -> None:
    data_dir = tempfile.TemporaryDirectory(prefix="voxlane-gc-")
    config = ServerConfig(engine=EngineConfig(model_path=str(default_model_path())), data_dir=data_dir.name)
    app = build_app(config)
    async with app.router.lifespan_context(app):  # the engine and the pools start and stop as in serve
        state = app.state.voxlane
        await state.executors.run("text", prepare, "Warm the phonemiser up. Then measure.", default_voice_paths()[1])
        spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
        for p in spinners:
            p.start()
        try:
            unfrozen, frozen = [], []
            for _ in range(rounds):
                gc.unfreeze()
                tracked = len(gc.get_objects())
                unfrozen.append(_timed_collect())
                gc.freeze()
                frozen_count = gc.get_freeze_count()
                frozen.append(_timed_collect())
        finally:
            for p in spinners:
                p.terminate()
    data_dir.cleanup()
    ms = lambda xs: f"median {statistics.median(xs) * 1000:6.2f} ms, max {max(xs) * 1000:6.2f} ms"  # noqa: E731
    print(f"API process heap, {rounds} rounds, {busy} busy process(es) beside it:")
    print(f"  unfrozen: full collection walks {tracked:>7} objects: {ms(unfrozen)}")
    print(
        f"  frozen:   {frozen_count:>7} objects frozen, a full collection walks "
        f"{len(gc.get_objects()):>5}: {ms(frozen)}"
    )
    print(f"  ratio (median unfrozen / frozen): {statistics.median(unfrozen) / statistics.median(frozen):.0f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes to run beside it")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.busy))
