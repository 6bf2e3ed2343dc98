"""Streaming text-to-speech benchmark: pcm streams at several concurrencies, deadline vs FIFO order.

For each order (--tts-order deadline, then fifo) a fresh ``voxlane serve`` starts on 127.0.0.1, and for
each concurrency C, C streams start together. Per stream: TTFP (request sent -> first body byte of
audio), RTF (stream wall time / audio seconds), and playback underruns of a player that starts at the
first byte and plays in real time (count of stalls, total stall time). Per level: audio seconds produced
per wall second and the share of streams with any stall. Also: TTFP of a one-sentence input at C=1.

    .venv/bin/python benchmarks/tts_bench.py [--concurrency 1 4 8 16] [--orders deadline fifo]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voxlane.bench.server import running_server

PCM_RATE = 24000  # voxlane's pcm, like OpenAI's: 24 kHz, 16-bit, mono
PARAGRAPH = (
    "The old lighthouse stood at the edge of the cliff, watching over the harbour. Every night its "
    "lamp turned slowly, sending a beam across the dark water. Fishermen trusted it to guide them "
    "home through fog and storms. When the keeper retired, the town decided to keep the light "
    "burning, and volunteers took turns climbing the narrow stairs."
)
ONE_SENTENCE = "The weather today is sunny with a light breeze."


@dataclass
class StreamResult:
    ttfp_s: float
    wall_s: float
    audio_s: float
    stalls: int
    stall_s: float


def underruns(arrivals: list[tuple[float, float]]) -> tuple[int, float]:
    """``arrivals``: (time, cumulative audio seconds). A player starts at the first arrival and plays in
    real time; it stalls whenever it reaches the end of what has arrived."""
    if not arrivals:
        return 0, 0.0
    start, buffered = arrivals[0]
    stalled, count = 0.0, 0
    for t, cumulative in arrivals[1:]:
        played = t - start - stalled
        if played > buffered + 1e-3:
            count += 1
            stalled += played - buffered
        buffered = cumulative
    return count, stalled


async def one_stream(client: httpx.AsyncClient, url: str, text: str) -> StreamResult:
    body = {"model": "piper", "voice": "alloy", "input": text, "response_format": "pcm"}
    sent = time.perf_counter()
    arrivals: list[tuple[float, float]] = []
    total = 0
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            if chunk:
                total += len(chunk)
                arrivals.append((time.perf_counter(), total / 2 / PCM_RATE))
    wall = time.perf_counter() - sent
    audio = total / 2 / PCM_RATE
    stalls, stall_s = underruns(arrivals)
    return StreamResult(arrivals[0][0] - sent, wall, audio, stalls, stall_s)


async def level(url: str, concurrency: int, text: str) -> tuple[list[StreamResult], float]:
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=64)) as client:
        start = time.perf_counter()
        results = await asyncio.gather(*(one_stream(client, url, text) for _ in range(concurrency)))
        return list(results), time.perf_counter() - start


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def load_figures(base_url: str, concurrency: int) -> dict[str, float]:
    """One level on a running server (``benchmarks/gpu_configs.py``'s speech loads): a warm-up, a lone
    sentence's first audio five times, then ``concurrency`` paragraph streams at once."""
    url = base_url + "/v1/audio/speech"
    await level(url, 1, "Warm up.")
    short = [(await level(url, 1, ONE_SENTENCE))[0][0].ttfp_s for _ in range(5)]
    results, wall = await level(url, concurrency, PARAGRAPH)
    ttfp = [r.ttfp_s * 1000 for r in results]
    return {
        "one_sentence_ttfp_ms": round(statistics.median(short) * 1000, 1),
        "ttfp_p50_ms": round(statistics.median(ttfp), 1),
        "ttfp_p90_ms": round(pct(ttfp, 0.9), 1),
        "rtf_p50": round(statistics.median(r.wall_s / r.audio_s for r in results), 3),
        "audio_s_per_s": round(sum(r.audio_s for r in results) / wall, 1),
        "stalls": sum(r.stalls for r in results),
        "streams_stalled": round(sum(1 for r in results if r.stalls) / len(results), 3),
    }


async def bench_order(order: str, concurrencies: list[int], extra: list[str]) -> list[str]:
    rows = []
    with running_server("--tts-order", order, "--data-dir", tempfile.mkdtemp(), *extra, stop_timeout_s=10.0) as srv:
        url = srv.base_url + "/v1/audio/speech"
        await level(url, 1, "Warm up.")
        short = [(await level(url, 1, ONE_SENTENCE))[0][0].ttfp_s for _ in range(10)]
        rows.append(
            f"| {order} | 1 (one sentence x10) | {statistics.median(short) * 1000:.0f} | "
            f"{pct(short, 0.9) * 1000:.0f} | | | | | |"
        )
        for c in concurrencies:
            results, wall = await level(url, c, PARAGRAPH)
            ttfp = [r.ttfp_s * 1000 for r in results]
            rtf = [r.wall_s / r.audio_s for r in results]
            audio = sum(r.audio_s for r in results)
            stalled = [r for r in results if r.stalls]
            rows.append(
                f"| {order} | {c} | {statistics.median(ttfp):.0f} | {pct(ttfp, 0.9):.0f} | "
                f"{statistics.median(rtf):.2f} | {audio / wall:.1f} | {sum(r.stalls for r in results)} | "
                f"{sum(r.stall_s for r in results):.1f} | {len(stalled) / len(results):.0%} |"
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--orders", nargs="+", default=["deadline", "fifo"])
    parser.add_argument("--server-flags", default="", help="extra flags for voxlane serve, e.g. '--tts-threads 2'")
    args = parser.parse_args()
    header = [
        "| order | streams | TTFP p50 ms | TTFP p90 ms | RTF p50 | audio s / wall s | stalls | "
        "stall s (total) | streams with a stall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    loads = [os.getloadavg()[0]]
    for order in args.orders:
        rows += asyncio.run(bench_order(order, args.concurrency, args.server_flags.split()))
        loads.append(os.getloadavg()[0])
    print("\n".join(header + rows))
    # The CPU is shared: say how busy the machine was, so runs can be compared.
    print(f"load average (1 min) at start and after each order: {', '.join(f'{x:.1f}' for x in loads)}")


if __name__ == "__main__":
    main()
