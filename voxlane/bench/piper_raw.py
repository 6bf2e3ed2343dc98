"""``voxlane bench piper``: raw Piper in this process, no server — the speech ceiling of the machine.

The paragraphs are normalised, split into sentences and phonemised before the clock starts. Then each
configuration synthesises all of them back to back: ``sessions`` onnxruntime sessions of ``threads``
intra-op threads each, every session on its own Python thread taking the next sentence from a shared
queue (onnxruntime releases the GIL in ``run``). ``1x<cores>`` is plain Piper on all cores, the
baseline the server is held to; ``<cores>x1`` is one session per core. Configurations run interleaved for
``--repeats`` rounds in ABBA order (the host drifts), and each reports audio seconds per wall second.
"""

from __future__ import annotations

import os
import queue
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from voxlane.bench.paragraphs import PARAGRAPHS
from voxlane.config import usable_cores


@dataclass(frozen=True)
class PiperLayout:
    sessions: int
    threads: int

    @property
    def name(self) -> str:
        return f"{self.sessions}x{self.threads}"

    @classmethod
    def parse(cls, text: str) -> PiperLayout:
        """'SESSIONSxTHREADS', e.g. '1x2'."""
        try:
            sessions, threads = (int(part) for part in text.lower().split("x"))
        except ValueError:
            raise ValueError(f"layout {text!r}: write SESSIONSxTHREADS, e.g. 1x2 or 2x1") from None
        if sessions < 1 or threads < 1:
            raise ValueError(f"layout {text!r}: sessions and threads must be at least 1")
        return cls(sessions, threads)


@dataclass
class PiperRun:
    layout: str
    wall_s: float
    audio_s: float

    @property
    def audio_s_per_wall_s(self) -> float:
        return self.audio_s / self.wall_s if self.wall_s else 0.0


@dataclass
class PiperBenchResult:
    paragraphs: int
    units: int
    audio_s: float
    runs: list[PiperRun] = field(default_factory=list)

    def best(self, layout: str) -> float:
        return max(r.audio_s_per_wall_s for r in self.runs if r.layout == layout)

    def median(self, layout: str) -> float:
        return statistics.median(r.audio_s_per_wall_s for r in self.runs if r.layout == layout)


def default_layouts() -> list[PiperLayout]:
    cores = usable_cores()
    layouts = [PiperLayout(1, cores)]
    if cores > 1:
        layouts.append(PiperLayout(cores, 1))
    return layouts


def phonemised_units(texts: tuple[str, ...] = PARAGRAPHS) -> list[Any]:
    """Every sentence of ``texts`` as a SpeechUnit for the bundled voice (whole sentences, as Piper speaks)."""
    from voxlane.config import default_voice_paths
    from voxlane.messages import SpeechUnit
    from voxlane.text.normalise import normalise
    from voxlane.text.phonemes import phoneme_ids
    from voxlane.text.sentences import split_sentences
    from voxlane.voice_config import load_voice_config

    model, config_path = default_voice_paths()
    voice = load_voice_config(config_path)
    units = []
    for n, text in enumerate(texts):
        for i, sentence in enumerate(split_sentences(normalise(text))):
            ids = phoneme_ids(sentence, voice)
            units.append(
                SpeechUnit(
                    f"p{n}", i, False, model, config_path, ids,
                    voice.length_scale, voice.noise_scale, voice.noise_w_scale, None,
                )
            )  # fmt: skip
    return units


def synthesise_all(units: list[Any], layout: PiperLayout) -> PiperRun:
    """All units through ``layout``: wall time and seconds of audio."""
    from voxlane.config import default_voice_paths
    from voxlane.runners.piper import load_voice, run_voice

    model, config_path = default_voice_paths()
    voices = [load_voice(model, config_path, layout.threads) for _ in range(layout.sessions)]
    run_voice(voices[0], units[0])  # warm the first session's allocations outside the clock
    work: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for unit in units:
        work.put(unit)
    samples = [0] * layout.sessions

    def drain(slot: int) -> None:
        while True:
            try:
                unit = work.get_nowait()
            except queue.Empty:
                return
            samples[slot] += len(run_voice(voices[slot], unit)[0])

    threads = [threading.Thread(target=drain, args=(slot,)) for slot in range(layout.sessions)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall_s = time.perf_counter() - start
    rate = voices[0].sample_rate
    return PiperRun(layout.name, wall_s, sum(samples) / rate)


def run_piper_bench(layouts: list[PiperLayout], repeats: int, paragraphs: int = len(PARAGRAPHS)) -> PiperBenchResult:
    units = phonemised_units(PARAGRAPHS[:paragraphs])
    result = PiperBenchResult(paragraphs, len(units), 0.0)
    for round_ in range(repeats):
        order = layouts if round_ % 2 == 0 else list(reversed(layouts))  # ABBA
        for layout in order:
            run = synthesise_all(units, layout)
            result.audio_s = run.audio_s
            result.runs.append(run)
            print(f"round {round_ + 1}: {layout.name}: {run.audio_s_per_wall_s:.1f} audio s / wall s", flush=True)
    return result


def format_piper_result(result: PiperBenchResult, layouts: list[PiperLayout]) -> str:
    base = layouts[0].name
    lines = [
        f"{'=' * 20} voxlane bench piper {'=' * 20}",
        f"{result.paragraphs} paragraphs, {result.units} sentences, {result.audio_s:.1f} s of audio; "
        f"{usable_cores()} usable cores; load average {os.getloadavg()[0]:.1f}",
        "| layout (sessions x threads) | audio s / wall s, median | best | median vs " + base + " |",
        "|---|---:|---:|---:|",
    ]
    for layout in layouts:
        ratios = [
            b.audio_s_per_wall_s / a.audio_s_per_wall_s
            for a, b in zip(
                (r for r in result.runs if r.layout == base), (r for r in result.runs if r.layout == layout.name)
            )
        ]
        lines.append(
            f"| {layout.name} | {result.median(layout.name):.1f} | {result.best(layout.name):.1f} "
            f"| {statistics.median(ratios):.2f}x |"
        )
    return "\n".join(lines)
