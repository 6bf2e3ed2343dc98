"""``voxlane bench diarize``: diarization's figures on synthetic conversations (bench/conversations.py)
against a running voxlane server.

For each conversation, one at a time: a plain transcription (``json``), a diarized one (``diarized_json``) and
one with the conversation's speakers named (``known_speaker_names[]`` + references); the server's CPU (its
API process and its engine, from /metrics) is read around each. Then ``--concurrency`` diarized
transcriptions at once while a probe GETs /health every 5 ms. Figures:

- DER: (missed + false alarm + confusion) / reference speech, in 10 ms frames, with a collar of 0.25 s
  around every reference boundary left out, hypothesis speakers mapped to the reference's one to one (the
  mapping with the most overlap); overlapped frames count each speaker. Its three parts are reported apart.
  With ``--num-speakers truth`` each diarized request sends the conversation's true speaker count as
  ``num_speakers``; with ``--rttm-dir`` each conversation's reference and hypothesis are written as RTTM.
- the share of files whose speaker count is right;
- named right: the share of the known-speaker run's segments whose name is the reference speaker that holds
  most of the segment's time;
- WER of the diarized text and of the plain text of the same audio, after Whisper's normaliser;
- CPU seconds per minute of audio, plain and diarized, and the ratio;
- /health p50/p99 under the concurrent load.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from voxlane.bench.conversations import (
    Conversation,
    build,
    load_pieces,
    piece_texts,
    references_file,
    two_speaker_sources,
    wav_bytes,
)
from voxlane.bench.hard_conversations import build_hard
from voxlane.bench.health_probe import HealthProbe
from voxlane.bench.metrics import percentile
from voxlane.bench.wer import error_counts, text_normaliser
from voxlane.speakers.rttm import to_rttm

COLLAR_S = 0.25
FRAME_S = 0.01


def der(conv: Conversation, segments: list[dict[str, Any]]) -> dict[str, float]:
    n = int(conv.duration_s / FRAME_S) + 1
    ref_names = sorted({t.speaker for t in conv.turns})
    hyp_names = sorted({s["speaker"] for s in segments})
    ref = np.zeros((len(ref_names), n), dtype=bool)
    hyp = np.zeros((max(1, len(hyp_names)), n), dtype=bool)
    scored = np.ones(n, dtype=bool)
    for t in conv.turns:
        a, b = int(t.start / FRAME_S), int(t.end / FRAME_S)
        ref[ref_names.index(t.speaker), a:b] = True
        for edge in (a, b):
            scored[max(0, edge - int(COLLAR_S / FRAME_S)) : edge + int(COLLAR_S / FRAME_S)] = False
    for s in segments:
        hyp[hyp_names.index(s["speaker"]), int(s["start"] / FRAME_S) : int(s["end"] / FRAME_S)] = True
    ref, hyp = ref[:, scored], hyp[:, scored]
    overlap = ref.astype(np.int64) @ hyp.T.astype(np.int64)
    best = _best_mapping(overlap)
    n_ref, n_hyp = ref.sum(axis=0), hyp.sum(axis=0)
    total = int(n_ref.sum())
    missed = int(np.maximum(n_ref - n_hyp, 0).sum())
    false_alarm = int(np.maximum(n_hyp - n_ref, 0).sum())
    confusion = int(np.minimum(n_ref, n_hyp).sum()) - best
    return {
        "der": (missed + false_alarm + confusion) / total,
        "missed": missed / total,
        "false_alarm": false_alarm / total,
        "confusion": confusion / total,
    }


def _best_mapping(overlap: np.ndarray) -> int:
    """The most overlap a one-to-one mapping of hypothesis speakers (columns) to reference ones (rows) gets:
    dynamic programming over the subsets of reference speakers taken, so many hypothesis speakers stay cheap."""
    best: dict[int, int] = {0: 0}
    for col in overlap.T:
        step = dict(best)
        for taken, total in best.items():
            for r in range(len(col)):
                if not taken >> r & 1:
                    key = taken | 1 << r
                    step[key] = max(step.get(key, 0), total + int(col[r]))
        best = step
    return max(best.values())


def named_right(conv: Conversation, segments: list[dict[str, Any]]) -> tuple[int, int]:
    right = 0
    for s in segments:
        held: dict[str, float] = {}
        for t in conv.turns:
            o = min(s["end"], t.end) - max(s["start"], t.start)
            if o > 0:
                held[t.speaker] = held.get(t.speaker, 0.0) + o
        right += bool(held) and max(held, key=held.__getitem__) == s["speaker"]
    return right, len(segments)


def _cpu_s(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    total = 0.0
    for name in ("process_cpu_seconds_total", "voxlane_engine_process_cpu_seconds_total"):
        m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
        if m is None:
            raise RuntimeError(f"/metrics has no {name}: is this a voxlane server?")
        total += float(m.group(1))
    return total


def _data_url(pcm: np.ndarray) -> str:
    return "data:audio/wav;base64," + base64.b64encode(wav_bytes(pcm)).decode()


@dataclass
class Options:
    base_url: str
    dev_dir: Path
    conversations: int
    overlap_conversations: int
    seed: int
    concurrency: int
    model: str
    truth_count: bool = False
    """Send each conversation's true speaker count as ``num_speakers``."""
    rttm_dir: Path | None = None
    """Where to write ``NAME.ref.rttm`` and ``NAME.hyp.rttm`` for each conversation."""
    set_name: str = "default"
    """"default" (``--conversations`` + ``--overlap-conversations``) or "hard" (bench/hard_conversations.py)."""


def _transcribe(client: httpx.Client, opts: Options, conv: Conversation, fields: dict[str, Any]) -> dict[str, Any]:
    response = client.post(
        "/v1/audio/transcriptions",
        files={"file": (f"{conv.name}.wav", wav_bytes(conv.pcm), "audio/wav")},
        data={"model": opts.model, **fields},
    )
    response.raise_for_status()
    return response.json()


def run(opts: Options) -> dict[str, Any]:
    _, normalise = text_normaliser()
    client = httpx.Client(base_url=opts.base_url, timeout=600.0)
    speakers = load_pieces(opts.dev_dir)
    words: dict[str, list[dict]] = {}
    # Each piece's reference words: the source's reference aligned to word timestamps.
    for name in two_speaker_sources(opts.dev_dir):
        data = (opts.dev_dir / "audio" / name).read_bytes()
        response = client.post(
            "/v1/audio/transcriptions",
            files={"file": (name, data)},
            data={"model": opts.model, "response_format": "verbose_json", "timestamp_granularities[]": "word"},
        )
        response.raise_for_status()
        words[name] = response.json()["words"]
    piece_texts(speakers, opts.dev_dir, references_file(opts.dev_dir), words)
    if opts.set_name == "hard":
        plain_set, overlap_set = build_hard(speakers, opts.seed), []
    else:
        plain_set = build(speakers, opts.conversations, opts.seed, known=True)
        overlap_set = build(speakers, opts.overlap_conversations, opts.seed + 1, overlap_every=3)
    rows = []
    for conv in plain_set + overlap_set:
        cpu0 = _cpu_s(client)
        plain = _transcribe(client, opts, conv, {})
        cpu1 = _cpu_s(client)
        diar = _transcribe(client, opts, conv, _diarized_fields(opts, conv))
        cpu2 = _cpu_s(client)
        if opts.rttm_dir is not None:
            write_rttm(opts.rttm_dir, conv, diar["segments"])
        row: dict[str, Any] = {
            "name": conv.name,
            "duration_s": conv.duration_s,
            "speakers": len(conv.speakers),
            "found": len({s["speaker"] for s in diar["segments"]}),
            "overlap": conv.overlap,
            "voices": {k: [v.gender, round(v.f0_hz)] for k, v in conv.voices.items()},
            "short_turns": conv.short_turns,
            **der(conv, diar["segments"]),
            "plain_errors": error_counts([conv.text], [plain["text"]], normalise),
            "diarized_errors": error_counts([conv.text], [diar["text"]], normalise),
            "cpu_plain_s": cpu1 - cpu0,
            "cpu_diarized_s": cpu2 - cpu1,
            "num_speakers_sent": opts.truth_count,
        }
        if conv.references:
            names = sorted(conv.references)
            known = _transcribe(
                client,
                opts,
                conv,
                {
                    "response_format": "diarized_json",
                    "known_speaker_names[]": names,
                    "known_speaker_references[]": [_data_url(conv.references[n]) for n in names],
                },
            )
            row["named_right"], row["named_segments"] = named_right(conv, known["segments"])
        rows.append(row)
        print(
            f"{conv.name:24s} {conv.duration_s:5.1f} s  speakers {row['speakers']} found {row['found']}  "
            f"DER {row['der']:.1%} (miss {row['missed']:.1%} FA {row['false_alarm']:.1%} "
            f"conf {row['confusion']:.1%})  cpu {row['cpu_plain_s']:.1f} -> {row['cpu_diarized_s']:.1f} s"
            + (f"  named {row['named_right']}/{row['named_segments']}" if "named_right" in row else ""),
            flush=True,
        )
    health = _health_under_load(client, opts, plain_set)
    return _summary(rows, health)


def _diarized_fields(opts: Options, conv: Conversation) -> dict[str, Any]:
    fields: dict[str, Any] = {"response_format": "diarized_json"}
    if opts.truth_count:
        fields["num_speakers"] = len(conv.speakers)
    return fields


def write_rttm(folder: Path, conv: Conversation, segments: list[dict[str, Any]]) -> None:
    """The conversation's reference turns and the server's segments, as ``NAME.ref.rttm`` / ``NAME.hyp.rttm``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{conv.name}.ref.rttm").write_text(to_rttm(conv.name, ((t.start, t.end, t.speaker) for t in conv.turns)))
    hyp = to_rttm(conv.name, ((s["start"], s["end"], s["speaker"]) for s in segments))
    (folder / f"{conv.name}.hyp.rttm").write_text(hyp)


def _health_under_load(client: httpx.Client, opts: Options, convs: list[Conversation]) -> dict[str, Any]:
    probe = HealthProbe(opts.base_url + "/health", 0.005)
    probe.start()
    errors: list[str] = []

    def one(conv: Conversation) -> None:
        try:
            _transcribe(client, opts, conv, _diarized_fields(opts, conv))
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=one, args=(convs[i % len(convs)],)) for i in range(opts.concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    result = probe.stop()
    lat = [x * 1000 for x in result.latencies_s]
    return {
        "concurrency": opts.concurrency,
        "wall_s": wall,
        "errors": errors,
        "probes": result.count,
        "probe_failures": result.failures,
        "health_p50_ms": percentile(lat, 50) if lat else None,
        "health_p99_ms": percentile(lat, 99) if lat else None,
        "health_max_ms": max(lat) if lat else None,
    }


def _summary(rows: list[dict[str, Any]], health: dict[str, Any]) -> dict[str, Any]:
    def wer(key: str, subset: list[dict[str, Any]]) -> float:
        c = [r[key] for r in subset]
        words = sum(x["words"] for x in c)
        return sum(x["sub"] + x["del"] + x["ins"] for x in c) / words if words else float("nan")

    clean = [r for r in rows if not r["overlap"]]
    over = [r for r in rows if r["overlap"]]
    named = [r for r in rows if "named_right" in r]
    minutes = sum(r["duration_s"] for r in rows) / 60
    cpu_plain = sum(r["cpu_plain_s"] for r in rows)
    cpu_diar = sum(r["cpu_diarized_s"] for r in rows)

    def mean(key: str, subset: list[dict[str, Any]]) -> float | None:
        return float(np.mean([r[key] for r in subset])) if subset else None

    return {
        "files": len(rows),
        "num_speakers_sent": rows[0].get("num_speakers_sent", False) if rows else False,
        **{
            f"mean_{key}_{name}": mean(key, subset)
            for key in ("der", "missed", "false_alarm", "confusion")
            for name, subset in (("no_overlap", clean), ("overlap", over))
        },
        "speaker_count_right": sum(r["found"] == r["speakers"] for r in rows) / len(rows),
        "worst_der": max(rows, key=lambda r: r["der"])["der"],
        "worst_file": max(rows, key=lambda r: r["der"])["name"],
        "mean_missed": float(np.mean([r["missed"] for r in rows])),
        "mean_false_alarm": float(np.mean([r["false_alarm"] for r in rows])),
        "mean_confusion": float(np.mean([r["confusion"] for r in rows])),
        "named_right": sum(r["named_right"] for r in named) / sum(r["named_segments"] for r in named)
        if named
        else None,
        "wer_plain": wer("plain_errors", rows),
        "wer_diarized": wer("diarized_errors", rows),
        "cpu_s_per_audio_min_plain": cpu_plain / minutes,
        "cpu_s_per_audio_min_diarized": cpu_diar / minutes,
        "diarization_cpu_overhead": cpu_diar / cpu_plain - 1,
        "health_under_load": health,
        "rows": rows,
    }


def format_summary(result: dict[str, Any]) -> str:
    h = result["health_under_load"]

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.1%}"

    return "\n".join(
        [
            f"files: {result['files']}",
            f"num_speakers sent (the true count): {'yes' if result['num_speakers_sent'] else 'no'}",
            f"mean DER (collar {COLLAR_S} s), no overlap: {pct(result['mean_der_no_overlap'])}; "
            f"with 0.5 s overlaps: {pct(result['mean_der_overlap'])}",
            *(
                f"  {label}: missed {pct(result[f'mean_missed_{name}'])}, false alarm "
                f"{pct(result[f'mean_false_alarm_{name}'])}, speaker confusion {pct(result[f'mean_confusion_{name}'])}"
                for label, name in (("no overlap", "no_overlap"), ("overlap", "overlap"))
            ),
            f"worst DER: {pct(result['worst_der'])} ({result['worst_file']}); "
            f"mean missed {pct(result['mean_missed'])}, "
            f"false alarm {pct(result['mean_false_alarm'])}, confusion {pct(result['mean_confusion'])}",
            f"speaker count right: {pct(result['speaker_count_right'])}",
            f"known speakers named right: {pct(result['named_right'])} of segments",
            f"WER diarized {pct(result['wer_diarized'])}, plain {pct(result['wer_plain'])}",
            f"CPU s per audio minute: plain {result['cpu_s_per_audio_min_plain']:.2f}, diarized "
            f"{result['cpu_s_per_audio_min_diarized']:.2f} (+{result['diarization_cpu_overhead']:.0%})",
            f"/health under {h['concurrency']} diarized transcriptions: p50 {h['health_p50_ms']:.1f} ms, "
            f"p99 {h['health_p99_ms']:.1f} ms, max {h['health_max_ms']:.1f} ms ({h['probes']} probes, "
            f"{h['probe_failures']} failed; {len(h['errors'])} request errors)",
        ]
    )


def save(result: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(result, indent=1, default=float))
