"""``voxlane bench sweep``: one benchmark per concurrency level, a table row each, one JSON, PNG plots."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from voxlane.bench import report, runner
from voxlane.bench.options import BenchOptions


def run_sweep(
    base: BenchOptions, levels: Sequence[int], items: Sequence[Any], print_fn: Any = print
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    print_fn(table_header(base.backend))
    for level in levels:
        opts = replace(base, max_concurrency=level, num_warmups=base.num_warmups if not results else 0)
        outcome = runner.run(opts, items)
        result = report.summarise(opts, outcome)
        results.append(result)
        print_fn(table_row(result))
    return results


_TRANSCRIPTION_COLUMNS = (
    ("conc", 5),
    ("ok", 5),
    ("fail", 5),
    ("req/s", 8),
    ("RTFx", 8),
    ("E2E p50", 9),
    ("E2E p90", 9),
    ("E2E p99", 9),
    ("TTFT p50", 9),
    ("WER", 7),
    ("health p99", 11),
)
_SPEECH_COLUMNS = (
    ("conc", 5),
    ("ok", 5),
    ("fail", 5),
    ("req/s", 8),
    ("audio/s", 8),
    ("TTFP p50", 9),
    ("TTFP p90", 9),
    ("TTFP p99", 9),
    ("E2E p50", 9),
    ("smooth", 7),
    ("underrun", 9),
    ("health p99", 11),
)


def _columns(backend: str) -> tuple[tuple[str, int], ...]:
    return _TRANSCRIPTION_COLUMNS if backend == "openai-audio" else _SPEECH_COLUMNS


def table_header(backend: str) -> str:
    cols = _columns(backend)
    header = "|" + "|".join(f" {name:>{width}} " for name, width in cols) + "|"
    rule = "|" + "|".join("-" * (width + 1) + ":" for _, width in cols) + "|"
    return f"{header}\n{rule}"


def _fmt(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def table_row(r: dict[str, Any]) -> str:
    health = r.get("health") or {}
    health_p99 = (health.get("latency_ms") or {}).get("p99")
    e2e = r["e2el_ms"]
    if r["backend"] == "openai-audio":
        ttft = r.get("ttft_ms") or {}
        cells = [
            r["max_concurrency"],
            r["completed"],
            r["failed"],
            _fmt(r["request_throughput"], 2),
            _fmt(r["rtfx"], 1),
            _fmt(e2e["median"], 0),
            _fmt(e2e["p90"], 0),
            _fmt(e2e["p99"], 0),
            _fmt(ttft.get("median"), 0),
            _pct(r["wer"]),
            _fmt(health_p99, 1),
        ]
    else:
        c, ttfp = r["continuity"], r["ttfp_ms"]
        cells = [
            r["max_concurrency"],
            r["completed"],
            r["failed"],
            _fmt(r["request_throughput"], 2),
            _fmt(r["audio_s_per_wall_s"], 2),
            _fmt(ttfp["median"], 0),
            _fmt(ttfp["p90"], 0),
            _fmt(ttfp["p99"], 0),
            _fmt(e2e["median"], 0),
            _pct(c["smooth_share"]),
            _pct(c["underrun_share"]),
            _fmt(health_p99, 1),
        ]
    cols = _columns(r["backend"])
    return "|" + "|".join(f" {cell!s:>{width}} " for cell, (_, width) in zip(cells, cols)) + "|"


def _pct(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def default_stem(backend: str) -> str:
    return f"sweep-{backend}-{time.strftime('%Y%m%d-%H%M%S')}"


def plot(results: Sequence[dict[str, Any]], stem: Path) -> list[Path]:
    """Draw the sweep's PNGs next to ``stem``; returns their paths. Raises ModuleNotFoundError without
    matplotlib (the optional ``plots`` extra; the caller says so and goes on)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [r["max_concurrency"] for r in results]
    backend = results[0]["backend"]
    paths: list[Path] = []

    def save(fig: Any, suffix: str) -> None:
        path = stem.parent / f"{stem.name}-{suffix}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    if backend == "openai-audio":
        ax.plot(levels, [_nan(r["rtfx"]) for r in results], "o-", label="RTFx (audio s / wall s)")
        ax.set_ylabel("RTFx")
    else:
        ax.plot(levels, [_nan(r["audio_s_per_wall_s"]) for r in results], "o-", label="audio s per wall s")
        ax.set_ylabel("audio seconds per wall second")
    ax2 = ax.twinx()
    ax2.plot(levels, [_nan(r["request_throughput"]) for r in results], "s--", color="tab:orange", label="requests/s")
    ax2.set_ylabel("requests/s")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    _concurrency_axis(ax, levels)
    ax.set_title(f"{backend}: throughput")
    ax.legend(loc="upper left")
    ax2.legend(loc="lower right")
    save(fig, "throughput")

    fig, ax = plt.subplots(figsize=(6, 4))
    for key in ("median", "p90", "p99"):
        ax.plot(levels, [_nan(r["e2el_ms"][key]) / 1000 for r in results], "o-", label=f"E2E {key}")
    ax.set_ylabel("latency (s)")
    ax.set_yscale("log")
    _concurrency_axis(ax, levels)
    ax.set_title(f"{backend}: end-to-end latency")
    ax.legend()
    save(fig, "latency")

    if backend == "openai-audio-speech":
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in ("median", "p90", "p99"):
            ax.plot(levels, [_nan(r["ttfp_ms"][key]) for r in results], "o-", label=f"TTFP {key}")
        ax.set_ylabel("time to first audio byte (ms)")
        ax.set_yscale("log")
        _concurrency_axis(ax, levels)
        ax.set_title("speech: time to first audio")
        ax.legend()
        save(fig, "ttfp")

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(
            levels,
            [100 * _nan(r["continuity"]["underrun_share"]) for r in results],
            "o-",
            label="streams with an underrun",
        )
        ax.plot(
            levels,
            [100 * (1 - _nan(r["continuity"]["smooth_share"])) for r in results],
            "s--",
            label=f"streams with a stall >= {results[0]['continuity']['stall_threshold_ms']:g} ms",
        )
        ax.set_ylabel("% of streams")
        ax.set_ylim(-2, 102)
        _concurrency_axis(ax, levels)
        ax.set_title("speech: playback continuity")
        ax.legend()
        save(fig, "underruns")
    return paths


def _concurrency_axis(ax: Any, levels: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([str(x) for x in levels])
    ax.set_xlabel("max concurrency")
    ax.grid(True, alpha=0.3)


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)
