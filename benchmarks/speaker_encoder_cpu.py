"""The speaker encoder's CPU per audio minute, in process, on one thread: the first N conversations of
``voxlane bench diarize``'s set (seed 0), cut into 30 s windows, their speaker mel and regions computed as the
API does. Each variant runs three times in the order A B B A A B; the best of each is printed, with the
largest difference of the region embeddings between variants.

- ``one-window``: this encoder, one window a call (the engine before it batched windows);
- ``batched``: this encoder, SPEAKER_WINDOWS windows a call (what the engine does);
- ``reference`` (with ``--reference FILE``): another version of voxlane/runners/speaker.py, one window a call,
  e.g. ``git show 78d4997:voxlane/runners/speaker.py > /tmp/speaker_main.py``.

``python benchmarks/speaker_encoder_cpu.py --conversations 4 --reference /tmp/speaker_main.py``
(docs/diarization.md)."""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from voxlane.bench.conversations import build, load_pieces
from voxlane.engine.core import SPEAKER_WINDOWS
from voxlane.runners.speaker import SpeakerEncoder
from voxlane.speakers.features import SAMPLE_RATE, window_speaker_features
from voxlane.speakers.weights import DEFAULT_PATH

Windows = list[tuple[np.ndarray, list[tuple[int, int]]]]


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("reference_speaker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SpeakerEncoder.load(DEFAULT_PATH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--dev-dir", default="../shared/data/dev")
    parser.add_argument("--reference", help="another voxlane/runners/speaker.py to compare")
    args = parser.parse_args()
    conversations = build(load_pieces(Path(args.dev_dir)), args.conversations, 0, known=True)
    window = 30 * SAMPLE_RATE
    windows: Windows = [
        window_speaker_features(c.pcm[s : s + window]) for c in conversations for s in range(0, len(c.pcm), window)
    ]
    minutes = sum(c.duration_s for c in conversations) / 60
    encoder = SpeakerEncoder.load(DEFAULT_PATH)
    variants: dict[str, Callable[[], list[np.ndarray]]] = {
        "one-window": lambda: [encoder.embed_regions(mel, regions)[0] for mel, regions in windows],
        "batched": lambda: [
            vectors
            for i in range(0, len(windows), SPEAKER_WINDOWS)
            for vectors, _ in encoder.embed_windows(windows[i : i + SPEAKER_WINDOWS])
        ],
    }
    if args.reference:
        reference = _load(args.reference)
        variants["reference"] = lambda: [reference.embed_regions(mel, regions)[0] for mel, regions in windows]
    names = list(variants)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, list[np.ndarray]] = {}
    with threadpool_limits(1):
        for order in (names, names[::-1], names):
            for name in order:
                start = time.thread_time()
                outputs[name] = variants[name]()
                cpu[name].append(time.thread_time() - start)
    print(f"{len(conversations)} conversations, {minutes:.2f} audio minutes, {len(windows)} windows")
    for name in names:
        runs = " ".join(f"{s / minutes:.3f}" for s in cpu[name])
        print(f"{name:11s} CPU s per audio minute: best {min(cpu[name]) / minutes:.3f} (runs {runs})")
    for name in names[1:]:
        diff = max(float(np.abs(a - b).max()) for a, b in zip(outputs[names[0]], outputs[name]) if len(a))
        print(f"largest difference of an embedding, {name} vs {names[0]}: {diff:.1e}")


if __name__ == "__main__":
    main()
