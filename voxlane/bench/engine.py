"""``voxlane bench engine``: the ceiling. The same dataset through decode, features and the Whisper runner
in this process, with no HTTP, no engine process and no scheduler, at several batch sizes.

One pass at batch size B: decode and split every request's audio, compute every window's log-mel features,
then run all windows through ``WhisperRunner.run`` in batches of B (in request order, so a batch mixes
requests as the server's does), then the continuations those asked for, in batches of B, until none is
left. Everything runs one step after another on one Python thread; the runner
uses ``--engine-threads`` native threads, as the server's engine does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voxlane.audio.pipeline import decode_and_split, window_features
from voxlane.bench import metrics, wer
from voxlane.bench.datasets import AudioSample, request_order
from voxlane.config import DEFAULT_MODEL_NAME, EngineConfig, ServerConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest, WindowResult
from voxlane.runners.base import WindowPass
from voxlane.server.formats import join_text

MAX_DURATION_S = 24 * 3600.0
DEFAULT_SPLIT_SEARCH_S = ServerConfig().split_search_s


@dataclass(frozen=True)
class EngineBenchOptions:
    model: str
    compute_type: str
    engine_threads: int
    beam_size: int
    batch_sizes: tuple[int, ...]
    num_prompts: int | None
    seed: int
    repeats: int = 1
    """Rounds over all batch sizes; the ceiling is the best pass."""
    split_search_s: float = DEFAULT_SPLIT_SEARCH_S
    """Where long audio is cut, as the server does (``voxlane serve --split-search-s``)."""


def engine_config(opts: EngineBenchOptions) -> EngineConfig:
    path = default_model_path() if opts.model == DEFAULT_MODEL_NAME else opts.model
    return EngineConfig(
        model_path=str(path),
        compute_type=opts.compute_type,
        engine_workers=1,
        engine_threads=opts.engine_threads,
        beam_size=opts.beam_size,
        max_batch_size=max(opts.batch_sizes),
    )


def run_engine_bench(opts: EngineBenchOptions, items: Sequence[AudioSample], dataset: str) -> dict[str, Any]:
    from voxlane.runners.whisper import WhisperRunner

    runner = WhisperRunner.load(engine_config(opts))
    order = request_order(len(items), opts.num_prompts or len(items), opts.seed)
    requests = [items[i] for i in order]
    audio_s = sum(r.duration_s for r in requests)
    name, normalise = wer.text_normaliser()
    _warm_up(runner, requests[0])
    passes = []
    # Rounds visit every batch size in turn, so that a change in the machine's other load during the run
    # spreads over all batch sizes instead of favouring the ones measured while it was quiet.
    for round_index in range(opts.repeats):
        for batch_size in opts.batch_sizes:
            passes.append(_one_pass(runner, opts, requests, audio_s, batch_size, normalise) | {"round": round_index})
    best = max(passes, key=lambda p: p["rtfx"])
    per_batch = []
    for batch_size in opts.batch_sizes:
        mine = [p for p in passes if p["batch_size"] == batch_size]
        per_batch.append(
            {
                "batch_size": batch_size,
                "best_rtfx": max(p["rtfx"] for p in mine),
                "median_rtfx": metrics.percentile([p["rtfx"] for p in mine], 50),
                "best_runner_rtfx": max(p["runner_rtfx"] for p in mine),
            }
        )
    return {
        "benchmark": "engine",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model": opts.model,
        "compute_type": opts.compute_type,
        "engine_threads": opts.engine_threads,
        "beam_size": opts.beam_size,
        "dataset": dataset,
        "num_prompts": len(requests),
        "input_audio_s": audio_s,
        "normaliser": name,
        "repeats": opts.repeats,
        "passes": passes,
        "per_batch_size": per_batch,
        "best_batch_size": best["batch_size"],
        "rtfx": best["rtfx"],
        "runner_rtfx": best["runner_rtfx"],
    }


def _one_pass(
    runner: Any,
    opts: EngineBenchOptions,
    requests: Sequence[AudioSample],
    audio_s: float,
    batch_size: int,
    normalise: Any,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    works = _prepare(runner, requests, opts.split_search_s)
    t_prep = time.perf_counter() - t0
    t1 = time.perf_counter()
    results, continuations = run_windows(runner, works, batch_size)
    t_run = time.perf_counter() - t1
    texts = _texts(results, len(requests))
    refs = [(r.text, t) for r, t in zip(requests, texts) if r.text is not None]
    rate, counted = wer.word_error_rate([a for a, _ in refs], [b for _, b in refs], normalise)
    return {
        "batch_size": batch_size,
        "windows": len(works),
        "continuations": continuations,
        "prepare_s": t_prep,
        "runner_s": t_run,
        "wall_s": t_prep + t_run,
        "rtfx": metrics.rtfx(audio_s, t_prep + t_run),
        "runner_rtfx": metrics.rtfx(audio_s, t_run),
        "wer": rate,
        "wer_requests": counted,
    }


def run_windows(runner: Any, works: Sequence[WindowPass], batch_size: int) -> tuple[list[WindowResult], int]:
    """Every window's final result (its passes' segments joined), as the engine core would send them, and
    how many continuation passes that took."""
    results: list[WindowResult] = []
    pending = list(works)
    continuations = 0
    while pending:
        later = []
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            out = runner.run(batch)
            if len(out) != len(batch):
                raise RuntimeError(f"the runner returned {len(out)} results for a batch of {len(batch)}")
            for work, output in zip(batch, out):
                if output.resume_s is not None and output.result.error is None:
                    later.append(work.continuation(output.resume_s, output.result.segments))
                else:
                    output.result.segments = work.earlier + output.result.segments
                    results.append(output.result)
        continuations += len(later)
        pending = later
    return results, continuations


def _prepare(runner: Any, requests: Sequence[AudioSample], split_search_s: float) -> list[WindowPass]:
    works = []
    options = TranscribeOptions()
    for i, request in enumerate(requests):
        windows = decode_and_split(request.data, MAX_DURATION_S, split_search_s).windows
        for index, window in enumerate(windows):
            features, n_frames, speech = window_features(window.pcm, runner.n_mels, window.offset_s, window.speech)
            msg = WindowRequest(
                request_id=str(i),
                index=index,
                count=len(windows),
                offset_s=window.offset_s,
                duration_s=window.duration_s,
                n_frames=n_frames,
                n_mels=runner.n_mels,
                options=options,
                speech=speech,
            )
            works.append(WindowPass(msg, features))
    return works


def _texts(results: Sequence[Any], n_requests: int) -> list[str]:
    by_request: list[list[Any]] = [[] for _ in range(n_requests)]
    for result in results:
        by_request[int(result.request_id)].append(result)
    return [join_text([s for r in sorted(rs, key=lambda r: r.index) for s in r.segments]) for rs in by_request]


def _warm_up(runner: Any, request: AudioSample) -> None:
    works = _prepare(runner, [request], DEFAULT_SPLIT_SEARCH_S)
    runner.run(works[:1])


def format_engine_result(r: dict[str, Any]) -> str:
    lines = [
        f"{'=' * 20} voxlane bench engine {'=' * 20}",
        f"model {r['model']} ({r['compute_type']}, {r['engine_threads']} threads, beam {r['beam_size']}); "
        f"{r['num_prompts']} requests, {r['input_audio_s']:.1f} s of audio from {r['dataset']}",
        f"{'round':>6}{'batch':>6}{'windows':>9}{'prepare s':>11}{'runner s':>10}{'RTFx':>9}{'runner RTFx':>13}"
        f"{'WER':>8}{'contin.':>9}",
    ]
    for p in r["passes"]:
        wer = "-" if p["wer"] != p["wer"] else f"{100 * p['wer']:.1f}%"
        lines.append(
            f"{p['round'] + 1:>6}{p['batch_size']:>6}{p['windows']:>9}{p['prepare_s']:>11.2f}"
            f"{p['runner_s']:>10.2f}{p['rtfx']:>9.1f}{p['runner_rtfx']:>13.1f}{wer:>8}{p['continuations']:>9}"
        )
    if r["repeats"] > 1:
        lines.append(
            "best RTFx per batch size: "
            + ", ".join(
                f"{b['batch_size']}: {b['best_rtfx']:.1f} (median {b['median_rtfx']:.1f})" for b in r["per_batch_size"]
            )
        )
    lines.append(
        f"ceiling: RTFx {r['rtfx']:.1f} at batch size {r['best_batch_size']} (runner alone: {r['runner_rtfx']:.1f})"
    )
    return "\n".join(lines)
