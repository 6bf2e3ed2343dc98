"""``voxlane bench tts`` and ``voxlane bench mixed``: speech under load, paired against its baselines.

The host's speed drifts, so each command holds everything it compares in one run, in ABBA order over
``--repeats`` rounds, and reports ratios taken within a round:

- ``bench tts``: for each server configuration (``--serve NAME=FLAGS``, each started here as
  ``voxlane serve`` on a free 127.0.0.1 port, or the server at ``--base-url``) the 16 paragraphs
  (``--dataset paragraphs``) as pcm streams at each ``--concurrency``, and raw Piper on all cores in this
  process (``bench piper``'s ``1x<cores>``) as the ceiling the server is held to.
- ``bench mixed``: 8 transcription clients (the dev set) and 8 speech streams (the paragraphs) at once,
  against each side alone, with the ``/health`` probe running throughout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxlane.bench import report, runner
from voxlane.bench.options import BenchOptions, add_load_arguments, options_from_args
from voxlane.bench.server import ServerProcess, ServerStartError


@dataclass(frozen=True)
class ServerSpec:
    name: str
    flags: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> ServerSpec:
        """'NAME=FLAGS', e.g. 'one-slot=--tts-slots 1 --tts-solo-threads 1', or 'NAME' for the defaults."""
        name, _, flags = text.partition("=")
        if not name.strip():
            raise ValueError(f"--serve {text!r}: write NAME=FLAGS, e.g. 'one-slot=--tts-slots 1'")
        return cls(name.strip(), tuple(flags.split()))


@contextlib.contextmanager
def target(spec: ServerSpec | None, base_url: str) -> Iterator[str]:
    """The base URL to measure: a server started for ``spec``, or ``base_url`` as given. A started server's
    log is kept only when it fails to start."""
    if spec is None:
        yield base_url
        return
    handle, name = tempfile.mkstemp(prefix=f"voxlane-bench-{spec.name}-", suffix=".log")
    os.close(handle)
    log_path = Path(name)
    srv = ServerProcess(*spec.flags, log_path=log_path)
    try:
        srv.wait_ready(180.0)
    except ServerStartError as exc:
        srv.stop(timeout_s=30.0)
        raise ValueError(f"--serve {spec.name}: {str(exc).splitlines()[0]}") from exc
    try:
        yield srv.base_url
    finally:
        srv.stop(timeout_s=30.0)
        log_path.unlink(missing_ok=True)


def load_options(base_url: str, extra: Sequence[str]) -> BenchOptions:
    """BenchOptions as ``bench serve`` would build them from these flags."""
    parser = argparse.ArgumentParser()
    add_load_arguments(parser, sweep=False)
    args = parser.parse_args(["--base-url", base_url, "--num-warmups", "1", *extra])
    opts = options_from_args(args)
    return BenchOptions(**{**opts.__dict__, "show_progress": False})


def speech_options(base_url: str, concurrency: int, prompts: int | None = None, probe: bool = True) -> BenchOptions:
    """The paragraphs as pcm streams, each once (or ``prompts`` of them), ``concurrency`` at once."""
    flags = ["--backend", "openai-audio-speech", "--dataset", "paragraphs", "--max-concurrency", str(concurrency)]
    flags += ["--num-prompts", str(prompts)] if prompts else []
    return load_options(base_url, flags + ([] if probe else ["--probe-health", "none"]))


def asr_options(
    base_url: str, dataset: str, concurrency: int, prompts: int | None = None, probe: bool = True
) -> BenchOptions:
    """Every file of ``dataset`` once (or ``prompts`` requests), ``concurrency`` at once."""
    flags = ["--backend", "openai-audio", "--dataset", dataset, "--max-concurrency", str(concurrency)]
    flags += ["--num-prompts", str(prompts)] if prompts else []
    return load_options(base_url, flags + ([] if probe else ["--probe-health", "none"]))


def measure(opts: BenchOptions) -> dict[str, Any]:
    return report.summarise(opts, runner.run(opts, runner.load_inputs(opts)))


def speech_row(r: dict[str, Any]) -> dict[str, Any]:
    """The speech figures of one run (TTFP, audio seconds per wall second, stalled streams, /health)."""
    cont = r.get("continuity") or {}
    ttfp = r.get("ttfp_ms") or {}
    health = r.get("health") or {}
    return {
        "completed": r["completed"],
        "failed": r["failed"],
        "ttfp_p50_ms": ttfp.get("median"),
        "ttfp_p90_ms": ttfp.get("p90"),
        "ttfp_p99_ms": ttfp.get("p99"),
        "audio_s_per_wall_s": r.get("audio_s_per_wall_s"),
        "stalled_share": cont.get("underrun_share"),
        "health_p99_ms": (health.get("latency_ms") or {}).get("p99"),
    }


def asr_row(r: dict[str, Any]) -> dict[str, Any]:
    health = r.get("health") or {}
    return {
        "completed": r["completed"],
        "failed": r["failed"],
        "rtfx": r.get("rtfx"),
        "health_p99_ms": (health.get("latency_ms") or {}).get("p99"),
    }


# --- bench tts -----------------------------------------------------------------------------------------


def run_tts(
    specs: Sequence[ServerSpec | None],
    base_url: str,
    levels: Sequence[int],
    repeats: int,
    piper: bool,
    prompts: int | None = None,
) -> dict[str, Any]:
    """Each configuration at each level, and raw Piper, for ``repeats`` rounds in ABBA order."""
    from voxlane.bench.piper_raw import PiperLayout, phonemised_units, synthesise_all
    from voxlane.config import usable_cores

    units = phonemised_units() if piper else []
    layout = PiperLayout(1, usable_cores())
    names = [s.name if s else "server" for s in specs]
    rows: list[dict[str, Any]] = []
    for round_ in range(repeats):
        order = list(range(len(specs))) if round_ % 2 == 0 else list(reversed(range(len(specs))))
        piper_first = round_ % 2 == 0
        if piper and piper_first:
            rows.append(_piper_row(round_, synthesise_all(units, layout)))
        for i in order:
            with target(specs[i], base_url) as url:
                for c in levels:
                    row = {"round": round_ + 1, "config": names[i], "concurrency": c}
                    row |= speech_row(measure(speech_options(url, c, prompts)))
                    rows.append(row)
                    print(_tts_line(row), flush=True)
        if piper and not piper_first:
            rows.append(_piper_row(round_, synthesise_all(units, layout)))
    return {"benchmark": "tts", "configs": names, "levels": list(levels), "rows": rows, "ratios": _ratios(rows)}


def _piper_row(round_: int, run: Any) -> dict[str, Any]:
    row = {"round": round_ + 1, "config": f"raw piper {run.layout}", "concurrency": 1}
    row["audio_s_per_wall_s"] = run.audio_s_per_wall_s
    print(f"round {round_ + 1}: raw piper {run.layout}: {run.audio_s_per_wall_s:.1f} audio s / wall s", flush=True)
    return row


def _tts_line(row: dict[str, Any]) -> str:
    return (
        f"round {row['round']}: {row['config']} c={row['concurrency']}: TTFP p50 {_f(row['ttfp_p50_ms'])} "
        f"p99 {_f(row['ttfp_p99_ms'])} ms, {_f(row['audio_s_per_wall_s'], 1)} audio s / wall s, "
        f"stalled {_f(100 * (row['stalled_share'] or 0), 0)} %, failed {row['failed']}, "
        f"/health p99 {_f(row['health_p99_ms'], 1)} ms"
    )


def _ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median over rounds of (server audio s/s) / (raw Piper's, same round), per config and level."""
    piper = {r["round"]: r["audio_s_per_wall_s"] for r in rows if r["config"].startswith("raw piper")}
    ratios: dict[str, list[float]] = {}
    for r in rows:
        if r["config"].startswith("raw piper") or r["round"] not in piper:
            continue
        key = f"{r['config']} c={r['concurrency']} / raw piper"
        ratios.setdefault(key, []).append(r["audio_s_per_wall_s"] / piper[r["round"]])
    return {k: statistics.median(v) for k, v in ratios.items()}


def format_tts(result: dict[str, Any]) -> str:
    lines = [
        f"{'=' * 20} voxlane bench tts {'=' * 20}",
        f"16 paragraphs, pcm; load average now {os.getloadavg()[0]:.1f}",
        "| round | config | c | TTFP p50 ms | TTFP p99 ms | audio s / wall s | stalled streams | /health p99 ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['round']} | {r['config']} | {r['concurrency']} | {_f(r.get('ttfp_p50_ms'))} | "
            f"{_f(r.get('ttfp_p99_ms'))} | {_f(r['audio_s_per_wall_s'], 1)} | "
            f"{_pct(r.get('stalled_share'))} | {_f(r.get('health_p99_ms'), 1)} |"
        )
    for key, ratio in result["ratios"].items():
        lines.append(f"{key}: {ratio:.2f}x (median over rounds)")
    return "\n".join(lines)


# --- bench mixed ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MixedLoad:
    dataset: str
    asr_concurrency: int = 8
    tts_concurrency: int = 8
    asr_prompts: int | None = None
    """None: every file of the dataset once."""
    tts_prompts: int | None = None
    """None: every paragraph once."""


def run_mixed(specs: Sequence[ServerSpec | None], base_url: str, load: MixedLoad, repeats: int) -> dict[str, Any]:
    """Per configuration and round: ASR alone, speech alone, both at once (ABBA over rounds)."""
    names = [s.name if s else "server" for s in specs]
    rows: list[dict[str, Any]] = []
    for round_ in range(repeats):
        order = list(range(len(specs))) if round_ % 2 == 0 else list(reversed(range(len(specs))))
        for i in order:
            with target(specs[i], base_url) as url:
                modes = ["asr alone", "tts alone", "mixed"]
                for mode in modes if round_ % 2 == 0 else list(reversed(modes)):
                    row = {"round": round_ + 1, "config": names[i], "mode": mode}
                    row |= _mixed_once(url, load, mode)
                    rows.append(row)
                    print(_mixed_line(row), flush=True)
    return {"benchmark": "mixed", "configs": names, "rows": rows, "ratios": _mixed_ratios(rows)}


def _mixed_once(url: str, load: MixedLoad, mode: str) -> dict[str, Any]:
    asr = asr_options(url, load.dataset, load.asr_concurrency, load.asr_prompts, probe=mode != "mixed")
    tts = speech_options(url, load.tts_concurrency, load.tts_prompts)
    if mode == "asr alone":
        return {"asr": asr_row(measure(asr))}
    if mode == "tts alone":
        return {"tts": speech_row(measure(tts))}
    results: dict[str, dict[str, Any]] = {}

    def side(name: str, opts: BenchOptions) -> None:
        results[name] = measure(opts)

    # Both sides start together, each with its own event loop; the health probe runs with the speech side.
    threads = [threading.Thread(target=side, args=("asr", asr)), threading.Thread(target=side, args=("tts", tts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"asr": asr_row(results["asr"]), "tts": speech_row(results["tts"])}


def _mixed_line(row: dict[str, Any]) -> str:
    parts = [f"round {row['round']}: {row['config']} {row['mode']}:"]
    if "asr" in row:
        parts.append(f"ASR {_f(row['asr']['rtfx'], 1)}x real time ({row['asr']['failed']} failed)")
    if "tts" in row:
        t = row["tts"]
        parts.append(
            f"TTS {_f(t['audio_s_per_wall_s'], 1)} audio s/s, TTFP p50 {_f(t['ttfp_p50_ms'])} p99 "
            f"{_f(t['ttfp_p99_ms'])} ms, stalled {_pct(t['stalled_share'])}, /health p99 {_f(t['health_p99_ms'], 1)} ms"
        )
    return " ".join(parts)


def _mixed_ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median over rounds of mixed / alone, per side and configuration (same round, same server)."""
    out: dict[str, list[float]] = {}
    keyed = {(r["round"], r["config"], r["mode"]): r for r in rows}
    for (round_, config, mode), r in keyed.items():
        if mode != "mixed":
            continue
        asr_alone = keyed.get((round_, config, "asr alone"))
        tts_alone = keyed.get((round_, config, "tts alone"))
        if asr_alone and asr_alone["asr"]["rtfx"]:
            out.setdefault(f"{config}: ASR mixed / alone", []).append(r["asr"]["rtfx"] / asr_alone["asr"]["rtfx"])
        if tts_alone and tts_alone["tts"]["audio_s_per_wall_s"]:
            out.setdefault(f"{config}: TTS mixed / alone", []).append(
                r["tts"]["audio_s_per_wall_s"] / tts_alone["tts"]["audio_s_per_wall_s"]
            )
    return {k: statistics.median(v) for k, v in out.items()}


def format_mixed(result: dict[str, Any]) -> str:
    lines = [
        f"{'=' * 20} voxlane bench mixed {'=' * 20}",
        f"load average now {os.getloadavg()[0]:.1f}",
        "| round | config | mode | ASR RTFx | TTS audio s / wall s | TTFP p50 ms | TTFP p99 ms | stalled streams "
        "| /health p99 ms |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        a, t = r.get("asr") or {}, r.get("tts") or {}
        health = t.get("health_p99_ms") if t else a.get("health_p99_ms")
        lines.append(
            f"| {r['round']} | {r['config']} | {r['mode']} | {_f(a.get('rtfx'), 1)} | "
            f"{_f(t.get('audio_s_per_wall_s'), 1)} | {_f(t.get('ttfp_p50_ms'))} | {_f(t.get('ttfp_p99_ms'))} | "
            f"{_pct(t.get('stalled_share'))} | {_f(health, 1)} |"
        )
    for key, ratio in result["ratios"].items():
        lines.append(f"{key}: {ratio:.2f}x (median over rounds)")
    return "\n".join(lines)


def plot(result: dict[str, Any], stem: Path) -> list[Path]:
    """Bar charts of the run (matplotlib, the ``plots`` extra): one PNG per figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: list[Path] = []
    rows = result["rows"]
    if result["benchmark"] == "tts":
        panels = (
            ("audio_s_per_wall_s", "audio s / wall s"),
            ("ttfp_p50_ms", "TTFP p50 ms"),
            ("ttfp_p99_ms", "TTFP p99 ms"),
        )
        labels = sorted({(r["config"], r["concurrency"]) for r in rows}, key=lambda k: (k[1], k[0]))
    else:
        panels = (
            ("asr.rtfx", "ASR RTFx"),
            ("tts.audio_s_per_wall_s", "TTS audio s / wall s"),
            ("tts.ttfp_p99_ms", "TTFP p99 ms"),
        )
        labels = sorted({(r["config"], r["mode"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, (key, title) in zip(axes, panels):
        values = []
        for label in labels:
            found = [_get(r, key) for r in rows if (r["config"], r.get("concurrency", r.get("mode"))) == label]
            found = [v for v in found if v is not None]
            values.append(statistics.median(found) if found else 0.0)
        ax.bar(range(len(labels)), values)
        ax.set_xticks(range(len(labels)), [f"{a}\n{b}" for a, b in labels], fontsize=7, rotation=30)
        ax.set_title(title)
    fig.tight_layout()
    path = stem.with_name(stem.name + ".png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
    return paths


def _get(row: dict[str, Any], key: str) -> Any:
    value: Any = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _f(x: Any, digits: int = 0) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"
