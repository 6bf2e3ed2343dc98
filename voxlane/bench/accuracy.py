"""``voxlane bench accuracy``: a server against plain faster-whisper on the same files, in the same run.

Three systems transcribe every file of the dataset once: the server under test (at ``--max-concurrency``
requests at once, through the load generator of ``bench serve``), faster-whisper's sequential
``WhisperModel.transcribe`` one file at a time, and faster-whisper's ``BatchedInferencePipeline`` (Silero
VAD chunks, batched), both with the same model, compute type and beam size. Each transcript is scored
against the reference after the same normaliser (Whisper's EnglishTextNormalizer when installed): words,
substitutions, deletions, insertions and WER per file and for the corpus. A file whose reference is empty
(silence, noise) has no WER: the figure for it is the number of words output, which should be 0.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from voxlane.bench.datasets import AudioSample
from voxlane.bench.wer import Score, score

SYSTEMS = ("server", "faster-whisper", "fw-batched-vad")


@dataclass
class SystemRun:
    name: str
    texts: list[str | None]
    """One per file; None where the request failed."""
    wall_s: float
    errors: list[str] = field(default_factory=list)
    health_p99_ms: float | None = None
    """/health's 99th-percentile latency during the run (``--probe-health``; the server's run only)."""


def run_server(opts: Any, items: Sequence[AudioSample]) -> SystemRun:
    """Every file once through the server, ``opts.max_concurrency`` at once (the load generator of
    ``bench serve``); the texts in dataset order."""
    import dataclasses

    from voxlane.bench import metrics, runner
    from voxlane.bench.datasets import request_order

    opts = dataclasses.replace(opts, num_prompts=len(items))
    outcome = runner.run(opts, items)
    health = metrics.percentile([1000 * t for t in outcome.probe.latencies_s], 99) if outcome.probe else None
    order = request_order(len(items), len(items), opts.seed)
    texts: list[str | None] = [None] * len(items)
    errors = []
    for i, out in zip(order, outcome.outputs):
        if out.success:
            texts[i] = out.text
        else:
            errors.append(f"{items[i].name}: {out.error}")
    return SystemRun("server", texts, outcome.wall_s, errors, health)


def faster_whisper_model(model_path: str, compute_type: str, threads: int) -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(model_path, device="cpu", compute_type=compute_type, cpu_threads=threads)


def run_faster_whisper(model: Any, items: Sequence[AudioSample], beam_size: int, language: str | None) -> SystemRun:
    """Plain sequential faster-whisper: one file at a time, its defaults (conditioning on previous text,
    no VAD), greedy or beam as asked."""
    import io

    texts: list[str | None] = []
    start = time.perf_counter()
    for item in items:
        segments, _ = model.transcribe(io.BytesIO(item.data), beam_size=beam_size, language=language)
        texts.append("".join(s.text for s in segments))
    return SystemRun("faster-whisper", texts, time.perf_counter() - start)


def run_faster_whisper_batched(
    model: Any, items: Sequence[AudioSample], beam_size: int, language: str | None, batch_size: int
) -> SystemRun:
    """faster-whisper's BatchedInferencePipeline: Silero VAD chunks of at most 30 s, decoded in batches."""
    import io

    from faster_whisper import BatchedInferencePipeline

    pipeline = BatchedInferencePipeline(model)
    texts: list[str | None] = []
    start = time.perf_counter()
    for item in items:
        segments, _ = pipeline.transcribe(
            io.BytesIO(item.data), beam_size=beam_size, language=language, batch_size=batch_size
        )
        texts.append("".join(s.text for s in segments))
    return SystemRun("fw-batched-vad", texts, time.perf_counter() - start)


def table(items: Sequence[AudioSample], runs: Sequence[SystemRun], normalise: Callable[[str], str]) -> dict[str, Any]:
    """Per-file and corpus scores of every run."""
    files = []
    totals = {run.name: Score() for run in runs}
    for i, item in enumerate(items):
        row: dict[str, Any] = {"file": item.name, "duration_s": round(item.duration_s, 2)}
        for run in runs:
            text = run.texts[i]
            if text is None:
                row[run.name] = None
                continue
            s = score(item.text or "", text, normalise)
            totals[run.name] += s
            row[run.name] = s.as_dict() | {"text": text}
        files.append(row)
    return {
        "files": files,
        "total": {name: s.as_dict() for name, s in totals.items()},
        "wall_s": {run.name: run.wall_s for run in runs},
        "health_p99_ms": {run.name: run.health_p99_ms for run in runs if run.health_p99_ms is not None},
        "failed": {run.name: sum(t is None for t in run.texts) for run in runs},
    }


def format_table(result: dict[str, Any], names: Sequence[str]) -> str:
    def cell(s: dict[str, Any] | None) -> str:
        if s is None:
            return f"{'failed':>24}"
        if s["wer"] is None:
            return f"{'(' + str(s['output_words']) + ' words out)':>24}"
        return f"{100 * s['wer']:>6.1f}% {s['sub']:>4}/{s['del']:>3}/{s['ins']:>3}  ".rjust(24)

    head = f"{'file':<48}{'dur s':>7}{'ref':>5}" + "".join(f"{n[:22]:>24}" for n in names)
    lines = [head, f"{'':<60}" + "".join(f"{'WER   sub/del/ins':>24}" for _ in names)]
    for row in result["files"]:
        ref_words = next((row[n]["words"] for n in names if row.get(n)), 0)
        lines.append(
            f"{row['file'][-48:]:<48}{row['duration_s']:>7.1f}{ref_words:>5}" + "".join(cell(row.get(n)) for n in names)
        )
    total = result["total"]
    lines.append(f"{'corpus':<48}{'':>7}{total[names[0]]['words']:>5}" + "".join(cell(total[n]) for n in names))
    lines.append(f"{'wall s':<60}" + "".join(f"{result['wall_s'][n]:>22.1f}  " for n in names))
    health = result.get("health_p99_ms") or {}
    if health:
        lines.append(f"{'/health p99 ms':<60}" + "".join(f"{health.get(n, math.nan):>22.1f}  " for n in names))
    return "\n".join(lines)
