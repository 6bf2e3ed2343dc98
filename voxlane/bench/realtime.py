"""``voxlane bench realtime``: N live transcription streams at once, each a dataset file sent at real time.

Each stream is one WebSocket to ``/v1/realtime`` (OpenAI's Realtime transcription protocol) that sends
1 s of silence, its file as 24 kHz pcm16 in 100 ms chunks on a fixed clock (``--speed`` x real time), and
1.5 s of silence, so that server_vad finds the end of the speech. What it measures (docs/benchmarks.md):

- delta latency: from the moment the audio a delta was read from had been sent (voxlane's ``audio_end_ms``
  on the delta) to the delta's arrival: how far the text on screen trails the voice;
- final latency: from the moment the turn's audio had been sent (``audio_end_ms`` of
  ``speech_stopped``, which includes the closing silence server_vad waits for; in manual mode, the commit)
  to ``completed`` (the speaker waits ``silence_duration_ms``, 500 ms here, longer: server_vad's wait
  for the end of the turn);
- partials per second while speaking: deltas that arrive while a turn is open, over the seconds turns are
  open, and the longest gap between two text updates of an open turn;
- WER of the finals (each file's completed turns joined) against the references, and of the batch
  endpoint (``/v1/audio/transcriptions``) on the same files, measured after the streams;
- /health latency, probed every 20 ms on its own thread during the run;
- optionally ``--batch-concurrency`` batch transcriptions sent in a loop during the run (the long files
  first), counted when they complete.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CHUNK_S = 0.1
LEAD_S = 1.0
TRAIL_S = 1.5
RATE = 24000


def add_realtime_parser(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser(
        "realtime",
        help="N live transcription streams over /v1/realtime at real time: latency, partials, WER, /health",
        description="Stream N dataset files at once over N WebSockets (OpenAI Realtime transcription protocol) "
        "at --speed x real time and report delta latency, final latency, partials per second while speaking, "
        "WER of the finals against the batch endpoint on the same files, and /health latency during the run.",
    )
    p.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server (default: %(default)s)")
    p.add_argument("--dataset", required=True, help="a manifest.jsonl (audio, text, duration_s)")
    p.add_argument("--streams", type=int, default=8, help="live streams at once (default: %(default)s)")
    p.add_argument(
        "--max-duration-s", type=float, default=30.0, help="use the dataset's files up to this long (default: 30)"
    )
    p.add_argument(
        "--min-duration-s", type=float, default=0.0, help="use the dataset's files at least this long (default: 0)"
    )
    p.add_argument("--speed", type=float, default=1.0, help="times real time each stream sends (default: 1)")
    p.add_argument(
        "--turn-detection",
        choices=("server_vad", "manual"),
        default="server_vad",
        help="server_vad, or manual: commit after each file (default: server_vad)",
    )
    p.add_argument(
        "--silence-duration-ms",
        type=int,
        default=500,
        help="server_vad's silence that ends a turn (default: 500, OpenAI's)",
    )
    p.add_argument(
        "--batch-concurrency",
        type=int,
        default=0,
        help="batch transcriptions kept in flight during the run, the dataset's longest files first (default: 0)",
    )
    p.add_argument(
        "--settle-timeout-s",
        type=float,
        default=60.0,
        help="how long a stream waits after its audio for the last turn's text (default: 60)",
    )
    p.add_argument("--api-key", default="unused", help="sent as Authorization: Bearer (default: unused)")
    p.add_argument("--save-result", help="write the figures as JSON to this file")
    p.set_defaults(func=_main)


@dataclass
class Item:
    path: Path
    text: str
    duration_s: float


@dataclass
class StreamResult:
    item: Item
    sent_at: list[float] = field(default_factory=list)
    """Wall time (perf_counter) at which each chunk had been sent."""
    speech_end_at: float = 0.0
    delta_latencies_s: list[float] = field(default_factory=list)
    final_latencies_s: list[float] = field(default_factory=list)
    transcripts: list[str] = field(default_factory=list)
    open_s: float = 0.0
    """Seconds turns were open (speech_started to committed), on the clock."""
    partials: int = 0
    gaps_s: list[float] = field(default_factory=list)
    last_final_at: float = 0.0
    errors: list[str] = field(default_factory=list)

    def sent_time(self, audio_ms: float) -> float:
        i = min(len(self.sent_at) - 1, max(0, int(np.ceil(audio_ms / 1000 / CHUNK_S)) - 1))
        return self.sent_at[i]


def load_items(manifest: str, max_duration_s: float, min_duration_s: float = 0.0) -> list[Item]:
    base = Path(manifest).parent
    items = []
    for line in Path(manifest).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if min_duration_s <= float(row["duration_s"]) <= max_duration_s and row.get("text", "").strip():
                items.append(Item(base / row["audio"], row["text"], float(row["duration_s"])))
    return items


def pcm24k(path: Path) -> bytes:
    from voxlane.audio.pipeline import decode_and_split
    from voxlane.audio.resample import resamplers

    audio = decode_and_split(path.read_bytes(), 3600.0, 8.0)
    pcm = np.zeros(audio.n_samples, dtype=np.int16)
    for w in audio.windows:
        pcm[w.start : w.end] = w.pcm
    samples = resamplers.resample(pcm.astype(np.float32) / 32768.0, 16000, RATE)
    lead, trail = np.zeros(int(LEAD_S * RATE), np.float32), np.zeros(int(TRAIL_S * RATE), np.float32)
    return (np.clip(np.concatenate((lead, samples, trail)), -1, 1) * 32767).astype("<i2").tobytes()


async def stream(
    url: str, key: str, item: Item, pcm: bytes, speed: float, manual: bool, silence_ms: int, settle_s: float
) -> StreamResult:
    import websockets

    result = StreamResult(item)
    step = int(CHUNK_S * RATE) * 2
    turns_open: dict[str, float] = {}
    last_text_at: dict[str, float] = {}
    committed: set[str] = set()
    completed: set[str] = set()
    turn_ended_at: dict[str, float] = {}
    """Per turn, when the audio that ended it had been sent (speech_stopped's audio_end_ms, or the commit)."""
    settled = asyncio.Event()
    """Set whenever every committed turn has its text and none is open."""

    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}, max_size=None) as ws:
        vad = None if manual else {"type": "server_vad", "silence_duration_ms": silence_ms}
        update = {"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": RATE}, "transcription": {"model": "whisper-1", "language": "en"},
            "turn_detection": vad}}}}  # fmt: skip
        await ws.send(json.dumps(update))

        async def read() -> None:
            async for message in ws:
                now = time.perf_counter()
                event = json.loads(message)
                kind = event["type"]
                opens = kind == "input_audio_buffer.speech_started" or (manual and kind.endswith(".delta"))
                if opens and event["item_id"] not in committed:
                    turns_open.setdefault(event["item_id"], now)
                    last_text_at.setdefault(event["item_id"], now)
                    settled.clear()
                if kind.endswith(".delta"):
                    item_id = event["item_id"]
                    if item_id in turns_open:  # a partial, while the turn is open
                        result.partials += 1
                        result.gaps_s.append(now - last_text_at[item_id])
                        last_text_at[item_id] = now
                    if "audio_end_ms" in event:
                        result.delta_latencies_s.append(now - result.sent_time(event["audio_end_ms"]))
                elif kind == "input_audio_buffer.speech_stopped":
                    turn_ended_at[event["item_id"]] = result.sent_time(event["audio_end_ms"])
                elif kind == "input_audio_buffer.committed":
                    committed.add(event["item_id"])
                    opened = turns_open.pop(event["item_id"], None)
                    if opened is not None:
                        result.open_s += now - opened
                    if manual:
                        turn_ended_at.setdefault(event["item_id"], now)
                    settled.clear()
                elif kind.endswith(".completed"):
                    completed.add(event["item_id"])
                    if event["item_id"] in turn_ended_at:  # (a turn the stream's end committed has no stop)
                        result.final_latencies_s.append(now - turn_ended_at.pop(event["item_id"]))
                    result.transcripts.append(event["transcript"])
                    result.last_final_at = now
                    if not turns_open and committed <= completed:
                        settled.set()
                elif kind == "error":
                    result.errors.append(f"{event['error']['code']}: {event['error']['message']}")

        reader = asyncio.create_task(read())
        start = time.perf_counter()
        for n, i in enumerate(range(0, len(pcm), step)):
            due = start + n * CHUNK_S / speed
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            chunk = base64.b64encode(pcm[i : i + step]).decode()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
            result.sent_at.append(time.perf_counter())
            if (n + 1) * CHUNK_S >= LEAD_S + item.duration_s and not result.speech_end_at:
                result.speech_end_at = result.sent_at[-1]
        if manual or turns_open:  # a turn still open after the trailing silence: commit it
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        try:
            await asyncio.wait_for(_settle(settled, committed, completed, turns_open), settle_s)
        except TimeoutError:
            result.errors.append(f"the turns' text had not all come within {settle_s:g} s of the end of the audio")
        reader.cancel()
    return result


async def _settle(settled: asyncio.Event, committed: set[str], completed: set[str], open_: dict[str, Any]) -> None:
    while True:
        await settled.wait()
        await asyncio.sleep(0.05)
        if settled.is_set() and committed <= completed and not open_:
            return


async def batch_loop(base_url: str, key: str, items: list[Item], stop: asyncio.Event, counts: dict[str, int]) -> None:
    import httpx  # here, not at the top: parsing the CLI must not import the bench's dependencies

    async with httpx.AsyncClient(base_url=base_url, timeout=600, headers={"Authorization": f"Bearer {key}"}) as client:
        i = 0
        while not stop.is_set():
            item = items[i % len(items)]
            i += 1
            try:
                response = await client.post(
                    "/v1/audio/transcriptions", files={"file": item.path.open("rb")}, data={"model": "whisper-1"}
                )
                counts["completed" if response.status_code == 200 else "failed"] += 1
            except httpx.HTTPError:
                counts["failed"] += 1


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(values, q))


def _main(args: argparse.Namespace) -> int:
    from voxlane.bench.health_probe import HealthProbe

    items = load_items(args.dataset, args.max_duration_s, args.min_duration_s)
    if not items:
        raise SystemExit(f"voxlane bench realtime: no files of at most {args.max_duration_s:g} s in {args.dataset}")
    chosen = [items[i % len(items)] for i in range(args.streams)]
    audio = {item.path: pcm24k(item.path) for item in chosen}
    url = args.base_url.replace("http", "ws", 1).rstrip("/") + "/v1/realtime?intent=transcription"
    all_items = load_items(args.dataset, float("inf"))
    batch_items = sorted(all_items, key=lambda it: -it.duration_s)

    async def run() -> tuple[list[StreamResult], dict[str, int], float]:
        stop = asyncio.Event()
        counts = {"completed": 0, "failed": 0}
        loops = [
            asyncio.create_task(batch_loop(args.base_url, args.api_key, batch_items, stop, counts))
            for _ in range(args.batch_concurrency)
        ]
        began = time.perf_counter()
        results = await asyncio.gather(
            *(
                stream(
                    url,
                    args.api_key,
                    item,
                    audio[item.path],
                    args.speed,
                    args.turn_detection == "manual",
                    args.silence_duration_ms,
                    args.settle_timeout_s,
                )
                for item in chosen
            )
        )
        elapsed = time.perf_counter() - began
        stop.set()
        await asyncio.gather(*loops)
        return list(results), counts, elapsed

    probe = HealthProbe(args.base_url.rstrip("/") + "/health", 0.02)
    probe.start()
    results, batch_counts, elapsed = asyncio.run(run())
    health = probe.stop()
    batch_texts = _batch_texts(args.base_url, args.api_key, chosen)
    figures = _figures(results, batch_texts, health.latencies_s, health.failures, batch_counts, elapsed, args)
    _print(figures)
    if args.save_result:
        Path(args.save_result).write_text(json.dumps(figures, indent=2))
    return 0


def _batch_texts(base_url: str, key: str, items: list[Item]) -> list[str]:
    import httpx

    with httpx.Client(base_url=base_url, timeout=600, headers={"Authorization": f"Bearer {key}"}) as client:
        return [
            client.post("/v1/audio/transcriptions", files={"file": it.path.open("rb")}, data={"model": "whisper-1"})
            .json()
            .get("text", "")
            for it in items
        ]


def _figures(
    results: list[StreamResult],
    batch_texts: list[str],
    health_s: list[float],
    health_failures: int,
    batch_counts: dict[str, int],
    elapsed_s: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    from voxlane.bench.wer import wer as corpus_wer

    def wer(hyps: list[str]) -> float:
        return corpus_wer(refs, hyps)

    refs = [r.item.text for r in results]
    finals = [" ".join(r.transcripts) for r in results]
    deltas = [x for r in results for x in r.delta_latencies_s]
    finals_s = [x for r in results for x in r.final_latencies_s]
    gaps = [x for r in results for x in r.gaps_s]
    open_s = sum(r.open_s for r in results)
    ms = 1000.0
    return {
        "streams": len(results),
        "speed": args.speed,
        "turn_detection": args.turn_detection,
        "silence_duration_ms": args.silence_duration_ms,
        "elapsed_s": round(elapsed_s, 2),
        "audio_s": round(sum(r.item.duration_s for r in results), 1),
        "delta_latency_ms": {"p50": _ms(_pct(deltas, 50)), "p95": _ms(_pct(deltas, 95)), "count": len(deltas)},
        "final_latency_ms": {
            "p50": _ms(_pct(finals_s, 50)),
            "p95": _ms(_pct(finals_s, 95)),
            "max": _ms(max(finals_s, default=0)),
            "count": len(finals_s),
        },
        "partials_per_s_while_speaking": round(sum(r.partials for r in results) / open_s, 2) if open_s else None,
        "text_update_gap_ms": {
            "p50": _ms(_pct(gaps, 50)),
            "p95": _ms(_pct(gaps, 95)),
            "max": _ms(max(gaps, default=0)),
        },
        "wer_finals": round(wer(finals) * 100, 2),
        "wer_batch_endpoint": round(wer(batch_texts) * 100, 2),
        "health_ms": {
            "p50": _ms(_pct(health_s, 50)),
            "p99": _ms(_pct(health_s, 99)),
            "max": round(max(health_s, default=0) * ms, 1),
            "probes": len(health_s),
            "failures": health_failures,
        },
        "batch_transcriptions": batch_counts,
        "errors": [e for r in results for e in r.errors][:20],
        "per_stream": [
            {"file": r.item.path.name, "final": f, "reference": r.item.text, "partials": r.partials}
            for r, f in zip(results, finals)
        ],
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)


def _print(f: dict[str, Any]) -> None:
    print(f"voxlane bench realtime: {f['streams']} streams at {f['speed']:g}x, {f['turn_detection']}, "
          f"{f['audio_s']} s of audio in {f['elapsed_s']} s")  # fmt: skip
    rows = [
        ("delta latency ms p50 / p95", f"{f['delta_latency_ms']['p50']} / {f['delta_latency_ms']['p95']}"),
        ("final latency ms p50 / p95 (after turn end)",
         f"{f['final_latency_ms']['p50']} / {f['final_latency_ms']['p95']}"),
        ("partials per second while speaking", f"{f['partials_per_s_while_speaking']}"),
        ("text update gap ms p50 / p95 / max",
         f"{f['text_update_gap_ms']['p50']} / {f['text_update_gap_ms']['p95']} / {f['text_update_gap_ms']['max']}"),
        ("WER finals / batch endpoint %", f"{f['wer_finals']} / {f['wer_batch_endpoint']}"),
        ("/health ms p50 / p99 / max", f"{f['health_ms']['p50']} / {f['health_ms']['p99']} / {f['health_ms']['max']}"),
        ("batch transcriptions completed / failed",
         f"{f['batch_transcriptions']['completed']} / {f['batch_transcriptions']['failed']}"),
    ]  # fmt: skip
    for name, value in rows:
        print(f"  {name:<46} {value}")
    for error in f["errors"]:
        print(f"  error: {error}")
