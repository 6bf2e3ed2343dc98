#!/usr/bin/env python3
"""Soak: mixed transcription and speech at capacity for a long time, with bad input and disconnects mixed
in, sampling the memory of every process of the server. Memory must be flat after warm-up.

Starts its own ``voxlane serve`` on 127.0.0.1 (``--server-args`` passes flags), then runs ``--asr`` workers
that transcribe dev-set files and ``--tts`` workers that stream speech of the built-in paragraphs, until
``--minutes`` have passed. Of each worker's requests, ``--bad-share`` send bad input (garbage bytes, an
empty file, a bad parameter, empty text, an unknown voice: each must get a 4xx) and ``--drop-share`` hang up
early (after a random part of the expected time). Every ``--sample-s`` seconds it records the resident
memory (VmRSS) of the server process and of each of its descendants, named by role (api, engine, audio,
text, encode, other).

Writes to ``--out``: ``soak.csv`` (one row per sample and process), ``soak.json`` (the figures: RSS per role
around 5 minutes and over the last 2 minutes, median and peak, the slope after 5 minutes, requests by
outcome) and ``soak-rss.png`` (RSS over time). ``--resummarise`` recomputes them from a run's soak.csv.

    .venv/bin/python benchmarks/soak.py --dataset DIR/manifest.jsonl --minutes 30 --out docs/soak
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.asr_bench import DATASET_HELP  # noqa: E402
from voxlane.bench.datasets import BUILTIN_TEXTS  # noqa: E402
from voxlane.bench.server import ServerStartError, running_server  # noqa: E402


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid``, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _role(pid: int, api_pid: int) -> str:
    if pid == api_pid:
        return "api"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "gone"
    for role in ("engine", "audio", "text", "encode"):
        if role in comm or f"voxlane-{role}" in cmd:
            return role
    return "other" if "resource_tracker" not in cmd else "tracker"


class Soak:
    def __init__(self, args: argparse.Namespace, base_url: str) -> None:
        self.args = args
        self.base_url = base_url
        self.deadline = time.monotonic() + args.minutes * 60
        self.outcomes: Counter[str] = Counter()
        rows = [json.loads(line) for line in Path(args.dataset).read_text().splitlines() if line.strip()]
        self.audio = [(Path(args.dataset).parent / r["audio"]).read_bytes() for r in rows if r.get("text")]
        self.rng = random.Random(args.seed)

    def _count(self, kind: str, status: int | str) -> None:
        self.outcomes[f"{kind} {status}"] += 1

    async def asr_worker(self, client: httpx.AsyncClient) -> None:
        while time.monotonic() < self.deadline:
            roll = self.rng.random()
            data = self.rng.choice(self.audio)
            fields = {"model": "whisper-1"}
            kind = "asr"
            if roll < self.args.bad_share:
                kind = "asr-bad"
                data, fields = self.rng.choice(
                    [
                        (os.urandom(4096), fields),
                        (b"", fields),
                        (data, {"model": "whisper-1", "response_format": "nope"}),
                        (data, {"model": "whisper-1", "temperature": "hot"}),
                    ]
                )
            coro = client.post(f"{self.base_url}/v1/audio/transcriptions", files={"file": ("a", data)}, data=fields)
            await self._send(kind, coro, roll)

    async def tts_worker(self, client: httpx.AsyncClient) -> None:
        while time.monotonic() < self.deadline:
            roll = self.rng.random()
            body = {
                "model": "tts-1",
                "voice": "alloy",
                "input": self.rng.choice(BUILTIN_TEXTS),
                "response_format": self.rng.choice(["mp3", "pcm", "opus", "wav"]),
            }
            kind = "tts"
            if roll < self.args.bad_share:
                kind = "tts-bad"
                body = self.rng.choice(
                    [
                        {**body, "input": ""},
                        {**body, "voice": "nobody-here"},
                        {**body, "response_format": "nope"},
                        {**body, "speed": 99},
                    ]
                )
            await self._send(kind, self._stream(client, body), roll)

    @staticmethod
    async def _stream(client: httpx.AsyncClient, body: dict) -> httpx.Response:
        async with client.stream("POST", "/v1/audio/speech", json=body) as response:
            async for _ in response.aiter_bytes():
                pass
            return response

    async def _send(self, kind: str, coro, roll: float) -> None:
        drop = self.args.bad_share <= roll < self.args.bad_share + self.args.drop_share
        try:
            if drop:  # hang up after a random part of what a request takes
                await asyncio.wait_for(coro, timeout=self.rng.uniform(0.05, 2.0))
                self._count(kind, "done-before-drop")
            else:
                response = await coro
                self._count(kind, response.status_code)
        except TimeoutError:
            self._count(kind, "dropped")
        except httpx.HTTPError as exc:
            self._count(kind, type(exc).__name__)

    async def sampler(self, api_pid: int, writer: csv.writer, samples: list[dict]) -> None:
        start = time.monotonic()
        while True:
            t = round(time.monotonic() - start, 1)
            by_role: Counter[str] = Counter()
            for pid in [api_pid, *_children(api_pid)]:
                rss = _rss_kb(pid)
                if rss is None:
                    continue
                role = _role(pid, api_pid)
                by_role[role] += rss
                writer.writerow([t, pid, role, rss])
            samples.append({"t": t, **by_role})
            if time.monotonic() >= self.deadline:
                return
            await asyncio.sleep(self.args.sample_s)


async def run(args: argparse.Namespace, base_url: str, api_pid: int, out: Path) -> dict:
    soak = Soak(args, base_url)
    samples: list[dict] = []
    limits = httpx.Limits(max_connections=args.asr + args.tts + 4)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:
        with open(out / "soak.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["t_s", "pid", "role", "rss_kb"])
            await asyncio.gather(
                soak.sampler(api_pid, writer, samples),
                *(soak.asr_worker(client) for _ in range(args.asr)),
                *(soak.tts_worker(client) for _ in range(args.tts)),
            )
        health = (await client.get("/health")).status_code
    return summarise(samples, soak.outcomes, health, args)


def summarise(samples: list[dict], outcomes: Counter[str], health: int, args: argparse.Namespace) -> dict:
    """RSS per role around 5 minutes and over the last minutes: median and peak of the samples of a
    2-minute window (the engine's RSS swings by hundreds of MiB from batch to batch, so one sample proves
    nothing), and the least-squares slope after 5 minutes, in MiB per minute (a leak shows as a steady one)."""
    roles = sorted({k for s in samples for k in s if k != "t"})
    end = samples[-1]["t"]

    def window(t0: float, t1: float) -> dict:
        inside = [s for s in samples if t0 <= s["t"] <= t1] or [min(samples, key=lambda s: abs(s["t"] - t1))]
        figures: dict = {"from_s": inside[0]["t"], "to_s": inside[-1]["t"]}
        for role in roles:
            values = sorted(s.get(role, 0) / 1024 for s in inside)
            figures[role] = {"median": round(values[len(values) // 2], 1), "max": round(values[-1], 1)}
        return figures

    def slope(role: str) -> float | None:
        points = [(s["t"] / 60, s.get(role, 0) / 1024) for s in samples if s["t"] >= 300 and role in s]
        if len(points) < 3:
            return None
        mean_t = sum(t for t, _ in points) / len(points)
        mean_m = sum(m for _, m in points) / len(points)
        spread = sum((t - mean_t) ** 2 for t, _ in points)
        return round(sum((t - mean_t) * (m - mean_m) for t, m in points) / spread, 2) if spread else None

    early, last = window(240.0, min(360.0, end)), window(max(0.0, end - 120.0), end)
    return {
        "minutes": args.minutes,
        "asr_workers": args.asr,
        "tts_workers": args.tts,
        "bad_share": args.bad_share,
        "drop_share": args.drop_share,
        "rss_mib_around_5_min": early,
        "rss_mib_last_2_min": last,
        "median_growth_mib": {r: round(last[r]["median"] - early[r]["median"], 1) for r in roles},
        "slope_mib_per_min_after_5_min": {r: slope(r) for r in roles},
        "requests": dict(sorted(outcomes.items())),
        "health_after": health,
    }


def resummarise(out: Path) -> dict:
    """Figures again from a finished run's soak.csv (and the request counts of its soak.json)."""
    by_t: dict[float, Counter[str]] = {}
    with open(out / "soak.csv") as f:
        for row in csv.DictReader(f):
            by_t.setdefault(float(row["t_s"]), Counter())[row["role"]] += int(row["rss_kb"])
    samples = [{"t": t, **by_t[t]} for t in sorted(by_t)]
    old = json.loads((out / "soak.json").read_text())
    args = argparse.Namespace(**{k: old[k] for k in ("minutes", "bad_share", "drop_share")})
    args.asr, args.tts = old["asr_workers"], old["tts_workers"]
    return summarise(samples, Counter(old["requests"]), old["health_after"], args)


def plot(out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no plot (pip install matplotlib)")
        return
    series: dict[str, dict[float, float]] = {}
    with open(out / "soak.csv") as f:
        for row in csv.DictReader(f):
            by_t = series.setdefault(row["role"], {})
            by_t[float(row["t_s"])] = by_t.get(float(row["t_s"]), 0) + int(row["rss_kb"]) / 1024
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for role, by_t in sorted(series.items()):
        ts = sorted(by_t)
        ax.plot([t / 60 for t in ts], [by_t[t] for t in ts], label=role)
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MiB, all processes of the role)")
    ax.set_title("voxlane soak: resident memory by process role")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "soak-rss.png", dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--asr", type=int, default=8, help="transcription workers (default 8)")
    parser.add_argument("--tts", type=int, default=8, help="speech workers (default 8)")
    parser.add_argument("--bad-share", type=float, default=0.05, help="share of requests with bad input")
    parser.add_argument("--drop-share", type=float, default=0.05, help="share of requests the client drops")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between memory samples")
    parser.add_argument("--dataset", help=DATASET_HELP + " (required unless --resummarise)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--server-args", default="", help="extra flags for voxlane serve")
    parser.add_argument("--out", default="soak-results")
    parser.add_argument(
        "--resummarise", action="store_true", help="recompute soak.json and the plot from --out's soak.csv; no run"
    )
    args = parser.parse_args()
    out = Path(args.out)
    if args.resummarise:
        figures = resummarise(out)
        (out / "soak.json").write_text(json.dumps(figures, indent=1) + "\n")
        plot(out)
        print(json.dumps(figures, indent=1))
        return 0
    if not args.dataset:
        parser.error("--dataset is required: pass --dataset PATH/manifest.jsonl (the transcription workers' files)")
    out.mkdir(parents=True, exist_ok=True)
    server_args = shlex.split(args.server_args)
    try:
        with running_server(*server_args, log_path=out / "server.log", ready_timeout_s=300.0) as server:
            figures = asyncio.run(run(args, server.base_url, server.pid, out))
    except ServerStartError as exc:
        print(exc)
        return 1
    (out / "soak.json").write_text(json.dumps(figures, indent=1) + "\n")
    plot(out)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
