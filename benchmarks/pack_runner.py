#!/usr/bin/env python3
"""--pack-short-s offline: the dev set's short pieces through `WhisperRunner` in batches, packed and not
(docs/asr-engine.md, third round).

Pieces: the dev set's files over 30 s cut at their quietest points into pieces of at most 12 s, and its files
of 15 s or less (124 pieces, 1,826 words). Each order shuffles them into batches of --batch; each batch runs
once with packing off and once with --pack-short-s 12. Continuations are not followed (either way).

    .venv/bin/python benchmarks/pack_runner.py --orders 2 --doubt-beam-size 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jiwer
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.wer import normalise  # noqa: E402
from voxlane.audio.decode import decode_audio  # noqa: E402
from voxlane.audio.features import FRAMES_PER_SECOND  # noqa: E402
from voxlane.audio.pipeline import window_features  # noqa: E402
from voxlane.audio.split import WindowCutter  # noqa: E402
from voxlane.config import EngineConfig, default_model_path  # noqa: E402
from voxlane.messages import TranscribeOptions, WindowRequest  # noqa: E402
from voxlane.runners.base import WindowPass  # noqa: E402
from voxlane.runners.whisper import WhisperRunner  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared/data/dev/manifest.jsonl"))
    parser.add_argument("--orders", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--doubt-beam-size", type=int, default=5)
    parser.add_argument("--pack-short-s", type=float, default=12.0)
    args = parser.parse_args()
    config = EngineConfig(model_path=str(default_model_path()), engine_workers=1, doubt_beam_size=args.doubt_beam_size)
    runner = WhisperRunner.load(config)
    manifest = Path(args.dataset)
    pieces, refs = [], {}
    for line in manifest.read_text().splitlines():
        row = json.loads(line)
        name = Path(row["audio"]).name
        pcm = decode_audio((manifest.parent / row["audio"]).read_bytes(), 3600.0).samples
        if row["duration_s"] > 30:
            cutter = WindowCutter(16000, window_s=12.0, search_s=4.0)
            parts = [p for _, p in cutter.feed(pcm)] + [p for _, p in cutter.finish()]
        elif row["duration_s"] <= 15:
            parts = [pcm]
        else:
            continue
        refs[name] = row["text"]
        for i, part in enumerate(parts):
            features, n_frames, speech = window_features(part, 80, 0.0)
            pieces.append((name, i, features, n_frames, speech))

    def score(texts: dict[tuple[str, int], str]) -> str:
        s = d = ins = n = 0
        for name, ref in refs.items():
            hyp = " ".join(texts[(p[0], p[1])] for p in pieces if p[0] == name)
            w = jiwer.process_words(normalise(ref), normalise(hyp) or "")
            s, d, ins, n = s + w.substitutions, d + w.deletions, ins + w.insertions, n + len(normalise(ref).split())
        return f"{100 * (s + d + ins) / n:.2f}% ({s}/{d}/{ins}) of {n} words"

    rng = np.random.default_rng(1)
    for order in range(args.orders):
        perm = rng.permutation(len(pieces))
        for pack_s in (0.0, args.pack_short_s):
            runner.pack_frames = round(pack_s * FRAMES_PER_SECOND)
            texts, packed, retried, started = {}, 0, 0, time.perf_counter()
            for k in range(0, len(perm), args.batch):
                batch = [pieces[j] for j in perm[k : k + args.batch]]
                works = [
                    WindowPass(WindowRequest("r", 0, 1, 0.0, n / FRAMES_PER_SECOND, n, 80, TranscribeOptions(), sp), f)
                    for _, _, f, n, sp in batch
                ]
                for piece, out in zip(batch, runner.run(works)):
                    texts[(piece[0], piece[1])] = "".join(s.text for s in out.result.segments).strip()
                    packed += out.result.packed
                    retried += out.result.unpacked_retry
            took = time.perf_counter() - started
            print(f"order {order}, pack {pack_s:g} s: {score(texts)}; packed {packed}, retried {retried}; {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
