#!/usr/bin/env python3
"""Cold load time and memory of each Whisper model, as the engine reports them.

For each model, a fresh ``voxlane serve --model OTHER --model-ttl-s 3`` (the other model is the default, so
the measured one loads on demand, into an engine that already runs), one short request for the model, then
the engine's log: ``loaded Whisper model ... in S s (+M MB resident)`` (the resident memory the engine grew
by while it loaded) and, once the TTL has passed, ``unloaded ... N MB resident freed``. Models in A B B A
order over ``--rounds`` rounds (the host's speed drifts).

    .venv/bin/python benchmarks/model_load.py --clip DIR/audio/cmu_goforward.wav --rounds 2

``--cycles N``: one server whose default is the first model, the second loaded by a request and unloaded by
the TTL N times over; the engine's resident memory with it loaded and after each unload, from /metrics.

    .venv/bin/python benchmarks/model_load.py --clip DIR/audio/cmu_goforward.wav --cycles 20
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voxlane.bench.server import ServerStartError, running_server

LOADED = re.compile(r"loaded Whisper model (\S+) in ([\d.]+) s \(\+(\d+) MB resident\)")
UNLOADED = re.compile(r"unloaded Whisper model (\S+) \(.*\): (-?\d+) MB resident freed")


def measure(model: str, default: str, clip: Path, log_path: Path, ttl_s: float) -> tuple[float, int, int]:
    """(load seconds, MB the engine grew by, MB an unload freed) of ``model`` in a server whose default is
    ``default``."""
    flags = ["--model", default, "--model", model, "--model-ttl-s", str(ttl_s)]
    with running_server(*flags, log_path=log_path, log_level="info", ready_timeout_s=300.0, stop_timeout_s=30.0) as srv:
        base_url = srv.base_url
        for _ in range(10):
            r = httpx.post(
                f"{base_url}/v1/audio/transcriptions",
                files={"file": clip.open("rb")},
                data={"model": model},
                timeout=120,
            )
            if r.status_code != 503:
                break
            time.sleep(float(r.headers.get("retry-after", 1)))
        r.raise_for_status()
        deadline = time.monotonic() + ttl_s + 30
        while time.monotonic() < deadline and not UNLOADED.search(log_path.read_text()):
            time.sleep(0.5)
    text = log_path.read_text()
    loaded, unloaded = LOADED.search(text), UNLOADED.search(text)
    if loaded is None or unloaded is None:
        raise SystemExit(f"no load or unload line in {log_path}")
    return float(loaded.group(2)), int(loaded.group(3)), int(unloaded.group(2))


def metric(page: str, name: str, model: str | None = None) -> float:
    label = f'{{model="{model}"}}' if model else ""
    for line in page.splitlines():
        if line.startswith(name + label + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name + label)


def cycles(default: str, model: str, clip: Path, n: int, ttl_s: float, log_path: Path) -> None:
    """``n`` loads and unloads of ``model`` in one server; prints the engine's memory at each."""
    flags = ["--model", default, "--model", model, "--model-ttl-s", str(ttl_s), "--model-load-wait-s", "120"]
    with running_server(*flags, log_path=log_path, log_level=None, ready_timeout_s=300.0, stop_timeout_s=30.0) as srv:
        url = srv.base_url

        def stats_after(unloads: int) -> str:
            while True:  # the engine's stats come once a second
                page = httpx.get(url + "/metrics").text
                try:
                    if metric(page, "voxlane_engine_model_unloads_total", model) >= unloads:
                        return page
                except KeyError:
                    pass
                time.sleep(0.2)

        first = None
        print(f"{'cycle':>5}{'MB loaded':>12}{'model MB':>10}{'MB after unload':>17}{'MB freed':>10}")
        for i in range(n):
            r = httpx.post(f"{url}/v1/audio/transcriptions", files={"file": clip.open("rb")},
                           data={"model": model}, timeout=180)  # fmt: skip
            r.raise_for_status()
            time.sleep(1.2)
            page = httpx.get(url + "/metrics").text
            rss = metric(page, "voxlane_engine_process_resident_memory_bytes")
            took = metric(page, "voxlane_engine_model_memory_bytes", model)
            after = metric(stats_after(i + 1), "voxlane_engine_process_resident_memory_bytes")
            first = after if first is None else first
            mb = (rss / 1e6, took / 1e6, after / 1e6, (rss - after) / 1e6)
            print(f"{i + 1:>5}{mb[0]:>12.0f}{mb[1]:>10.0f}{mb[2]:>17.0f}{mb[3]:>10.0f}")
        print(f"after the unloads: {first / 1e6:.0f} -> {after / 1e6:.0f} MB ({(after - first) / 1e6:+.0f} MB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="whisper-tiny.en,whisper-base", help="two models, comma-separated")
    parser.add_argument("--clip", required=True, help="a short speech file each load is asked to transcribe")
    parser.add_argument("--rounds", type=int, default=2, help="A B, then B A, ... (default 2)")
    parser.add_argument("--ttl-s", type=float, default=3.0)
    parser.add_argument("--result-dir", default="results/model-load")
    parser.add_argument("--cycles", type=int, default=0, help="load and unload the second model N times in one server")
    args = parser.parse_args()
    models = args.models.split(",")
    result_dir = Path(args.result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    if args.cycles:
        cycles(models[0], models[1], Path(args.clip), args.cycles, args.ttl_s, result_dir / "cycles.log")
        return 0
    runs: dict[str, list[tuple[float, int, int]]] = {m: [] for m in models}
    for i in range(args.rounds):
        for model in models if i % 2 == 0 else models[::-1]:
            default = next(m for m in models if m != model)
            print(f"{model} (default {default}) ...", file=sys.stderr)
            log_path = result_dir / f"{i}-{model}.log"
            runs[model].append(measure(model, default, Path(args.clip), log_path, args.ttl_s))
    print(f"{'model':<18}{'cold load s':>22}{'+MB resident':>18}{'MB freed by unload':>22}")
    for model, figures in runs.items():
        loads = " ".join(f"{s:.2f}" for s, _, _ in figures)
        grown = " ".join(str(mb) for _, mb, _ in figures)
        freed = " ".join(str(mb) for _, _, mb in figures)
        print(f"{model:<18}{loads:>22}{grown:>18}{freed:>22}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ServerStartError as exc:
        sys.exit(f"model_load: {exc}")
