"""A run's figures as one JSON-ready dict, its printout, and saving it. Definitions: docs/benchmarks.md."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voxlane import __version__
from voxlane.bench import metrics, wer
from voxlane.bench.backends import RequestOutput
from voxlane.bench.options import BenchOptions
from voxlane.bench.runner import RunOutcome

MAX_ERRORS_SHOWN = 5


def summarise(opts: BenchOptions, outcome: RunOutcome) -> dict[str, Any]:
    outs = outcome.outputs
    ok = [o for o in outs if o.success]
    failed = [o for o in outs if not o.success]
    wall = outcome.wall_s
    result: dict[str, Any] = {
        "voxlane_version": __version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "backend": opts.backend,
        "base_url": opts.base_url,
        "model": opts.model,
        "dataset": opts.dataset or "builtin",
        "dataset_size": outcome.dataset_size,
        "num_prompts": len(outs),
        "max_concurrency": opts.max_concurrency,
        "request_rate": "inf" if math.isinf(opts.request_rate) else opts.request_rate,
        "seed": opts.seed,
        "extra_body": opts.extra_body,
        "server_ready": outcome.ready,
        "ready_error": outcome.ready_error or None,
        "duration_s": wall,
        "completed": len(ok),
        "failed": len(failed),
        "errors": _first_errors(failed),
        "request_throughput": len(ok) / wall if wall > 0 else math.nan,
        "e2el_ms": metrics.latency_stats([o.latency_s for o in ok]),
    }
    if opts.backend == "openai-audio":
        result.update(_transcription(ok, wall))
        result["server_windows"] = outcome.server_windows
    else:
        result.update(_speech(opts, ok, wall, outcome.asr_outputs))
    result["health"] = _health(opts, outcome)
    result["client"] = {
        "cpu_s": outcome.client_cpu_s,
        "process_cpu_s": outcome.process_cpu_s,
        "cpu_per_request_ms": 1000 * outcome.client_cpu_s / len(outs) if outs else math.nan,
        "cpu_share_of_wall": outcome.client_cpu_s / wall if wall > 0 else math.nan,
    }
    if opts.save_detailed:
        result["requests"] = [_detail(o) for o in outs]
    return result


def _first_errors(failed: Sequence[RequestOutput]) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    for o in failed:
        counts[o.error] = counts.get(o.error, 0) + 1
    return [{"error": e, "count": c} for e, c in list(counts.items())[:MAX_ERRORS_SHOWN]]


def _transcription(ok: Sequence[RequestOutput], wall: float) -> dict[str, Any]:
    audio_s = sum(o.input_audio_s for o in ok)
    ttfts = [o.ttft_s for o in ok if o.ttft_s is not None]
    itls = [gap for o in ok for gap in metrics.inter_chunk_s(o.chunk_arrivals_s)]
    name, normalise = wer.text_normaliser()
    pairs = [(o.reference, o.text) for o in ok if o.reference is not None]
    summed, counted = wer.total([r for r, _ in pairs], [h for _, h in pairs], normalise, skip_empty_references=True)
    return {
        "input_audio_s": audio_s,
        "rtfx": metrics.rtfx(audio_s, wall),
        "ttft_ms": metrics.latency_stats(ttfts) if ttfts else None,
        "itl_ms": metrics.latency_stats(itls) if itls else None,
        "wer": summed.wer,
        "wer_requests": counted,
        "wer_errors": summed.counts(),
        "normaliser": name,
    }


def _speech(
    opts: BenchOptions, ok: Sequence[RequestOutput], wall: float, asr: Sequence[RequestOutput] | None
) -> dict[str, Any]:
    audio_s = sum(o.output_audio_s for o in ok)
    timed = [o for o in ok if o.audio_chunks]
    plays = [metrics.simulate_playback(o.audio_chunks) for o in timed]
    threshold_s = opts.stall_threshold_ms / 1000.0
    result: dict[str, Any] = {
        "output_audio_s": audio_s,
        "audio_s_per_wall_s": audio_s / wall if wall > 0 else math.nan,
        "ttfp_ms": metrics.latency_stats([o.ttfp_s for o in ok if o.ttfp_s is not None]),
        "rtf": _plain_stats([o.latency_s / o.output_audio_s for o in ok if o.output_audio_s > 0]),
        "continuity": {
            "streams": len(plays),
            "stall_threshold_ms": opts.stall_threshold_ms,
            "underruns_total": sum(p.underruns for p in plays),
            "underruns_per_stream": _plain_stats([p.underruns for p in plays]),
            "total_stall_ms": _plain_stats([1000 * p.total_stall_s for p in plays]),
            "max_stall_ms": _plain_stats([1000 * p.max_stall_s for p in plays]),
            "smooth_share": (sum(p.max_stall_s < threshold_s for p in plays) / len(plays)) if plays else math.nan,
            "underrun_share": (sum(p.underruns > 0 for p in plays) / len(plays)) if plays else math.nan,
        },
    }
    if asr is not None:
        name, normalise = wer.text_normaliser()
        good = [o for o in asr if o.success]
        rate, counted = wer.word_error_rate([o.reference or "" for o in good], [o.text for o in good], normalise)
        result["asr_check"] = {
            "url": opts.asr_check_url,
            "wer": rate,
            "requests": counted,
            "failed": len(asr) - len(good),
            "normaliser": name,
            "errors": _first_errors([o for o in asr if not o.success]),
        }
    return result


def _plain_stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {k: math.nan for k in ("mean", "median", "p90", "p99", "max")}
    return {
        "mean": sum(values) / len(values),
        "median": metrics.percentile(values, 50),
        "p90": metrics.percentile(values, 90),
        "p99": metrics.percentile(values, 99),
        "max": float(max(values)),
    }


def _health(opts: BenchOptions, outcome: RunOutcome) -> dict[str, Any] | None:
    probe = outcome.probe
    if probe is None:
        return None
    stats = metrics.latency_stats(probe.latencies_s)
    return {
        "path": opts.probe_health,
        "interval_ms": opts.probe_interval_ms,
        "probes": probe.count,
        "failures": probe.failures,
        "errors": probe.first_errors,
        "latency_ms": {k: stats[k] for k in ("p50", "p95", "p99", "max")},
    }


def _detail(o: RequestOutput) -> dict[str, Any]:
    t0 = o.start_s
    return {
        "success": o.success,
        "error": o.error or None,
        "start_s": o.start_s,
        "latency_s": o.latency_s,
        "input_audio_s": o.input_audio_s or None,
        "output_audio_s": o.output_audio_s or None,
        "ttft_s": o.ttft_s,
        "ttfp_s": o.ttfp_s,
        "text": o.text or None,
        "reference": o.reference,
        "chunk_offsets_s": [t - t0 for t in o.chunk_arrivals_s] or None,
        "audio_chunks": [[t - t0, d] for t, d in o.audio_chunks] or None,
    }


# --- output --------------------------------------------------------------------------------------------


def _ms(stats: dict[str, float] | None, key: str) -> str:
    if not stats or math.isnan(stats.get(key, math.nan)):
        return "-"
    return f"{stats[key]:.1f}"


def window_lines(w: dict[str, Any] | None) -> list[str]:
    """The server's windows over the run (bench/server_counters.py), when its /metrics could be read."""
    if not w:
        return []
    return [
        f"{'Whisper windows (per audio hour)':<40}{w['windows']} ({_num(w['windows_per_audio_hour'], 1)})",
        f"{'Continuation passes (per window)':<40}{w['continuation_passes']} "
        f"({_num(w['continuation_passes_per_window'], 3)})",
    ]


def format_result(r: dict[str, Any]) -> str:
    lines = [
        f"{'=' * 20} voxlane bench: {r['backend']} {'=' * 20}",
        f"{'Server':<40}{r['base_url']} (model {r['model']})",
        f"{'Dataset':<40}{r['dataset']} ({r['dataset_size']} items)",
        f"{'Max concurrency / request rate':<40}{r['max_concurrency']} / {r['request_rate']}",
        f"{'Successful / failed requests':<40}{r['completed']} / {r['failed']}",
        f"{'Benchmark duration (s)':<40}{r['duration_s']:.2f}",
        f"{'Request throughput (req/s)':<40}{r['request_throughput']:.3f}",
    ]
    if r["backend"] == "openai-audio":
        lines += [
            f"{'Audio transcribed (s)':<40}{r['input_audio_s']:.1f}",
            f"{'RTFx (audio s / wall s)':<40}{r['rtfx']:.2f}",
            f"{'WER':<40}{_pct(r['wer'])} over {r['wer_requests']} requests ({r['normaliser']})",
        ]
        if r.get("wer_errors"):
            e = r["wer_errors"]
            lines.append(
                f"{'WER errors: S / D / I (of words)':<40}{e['sub']} / {e['del']} / {e['ins']} (of {e['words']})"
            )
        lines += window_lines(r.get("server_windows"))
    else:
        c = r["continuity"]
        lines += [
            f"{'Audio produced (s)':<40}{r['output_audio_s']:.1f}",
            f"{'Audio s per wall s':<40}{r['audio_s_per_wall_s']:.2f}",
            f"{'RTF (E2E / audio s) median':<40}{_num(r['rtf']['median'])}",
            f"{'Streams with max stall < threshold':<40}{_pct(c['smooth_share'])} "
            f"(threshold {c['stall_threshold_ms']:g} ms, {c['streams']} streams)",
            f"{'Underruns (total / max per stream)':<40}{c['underruns_total']} / "
            f"{_num(c['underruns_per_stream']['max'], 0)}",
            f"{'Largest stall per stream (ms) p50/max':<40}{_num(c['max_stall_ms']['median'], 1)} / "
            f"{_num(c['max_stall_ms']['max'], 1)}",
        ]
        if "asr_check" in r:
            a = r["asr_check"]
            lines.append(f"{'ASR check WER':<40}{_pct(a['wer'])} over {a['requests']} ({a['failed']} failed)")
    lines.append(f"{'Latency (ms)':<16}{'mean':>9}{'median':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    rows = [
        ("E2E", r["e2el_ms"]),
        ("TTFT", r.get("ttft_ms")),
        ("inter-chunk", r.get("itl_ms")),
        ("TTFP", r.get("ttfp_ms")),
    ]
    for name, stats in rows:
        if stats:
            lines.append(
                f"  {name:<14}" + "".join(f"{_ms(stats, k):>9}" for k in ("mean", "median", "p90", "p99", "max"))
            )
    h = r.get("health")
    if h:
        lat = h["latency_ms"]
        lines.append(
            f"{'Health probe ' + h['path'] + ' (ms)':<40}p50 {_ms(lat, 'p50')}  p95 {_ms(lat, 'p95')}  "
            f"p99 {_ms(lat, 'p99')}  max {_ms(lat, 'max')}  ({h['probes']} probes, {h['failures']} failed)"
        )
    cl = r["client"]
    lines.append(
        f"{'Generator CPU (ms/request, share)':<40}{cl['cpu_per_request_ms']:.2f}  {_pct(cl['cpu_share_of_wall'])}"
    )
    for e in r["errors"]:
        lines.append(f"  error x{e['count']}: {e['error']}")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float, digits: int = 3) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def default_filename(r: dict[str, Any], prefix: str = "") -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{prefix}{r['backend']}-c{r['max_concurrency']}-{stamp}.json"


def save_json(data: Any, directory: str, filename: str) -> Path:
    path = Path(directory) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")
    return path


def json_safe(value: Any) -> Any:
    """NaN and infinities (a figure with no data) as null, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
