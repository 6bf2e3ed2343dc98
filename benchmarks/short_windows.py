#!/usr/bin/env python3
"""Short windows against 30 s windows, offline, on many short pieces with references (docs/asr-engine.md).

The dev set's files longer than 30 s are cut into pieces of at most --piece-s seconds at their quietest
points (the server's cut, `split.WindowCutter`); every piece is decoded by the bundled Whisper through
`WhisperRunner`, one piece a window, in each configuration; a file's text is its pieces' texts in order, so
each configuration is scored on the same 1,768 reference words (with --short-files, the dev set's files of
15 s or less too, one piece each: 124 pieces, 1,826 words). Configurations: `pad=P` is --short-window-pad-s
P (0: 30 s windows), `doubt=X` adds --doubt-beam-size 5 --doubt-log-prob X, `max=M` encodes windows of up to
M s short (on M + P s; runners/base.py SHORT_MAX_S, 8 in the server).

    .venv/bin/python benchmarks/short_windows.py --configs pad=0,pad=5,pad=5+doubt=-0.5
    .venv/bin/python benchmarks/short_windows.py --short-files \
        --configs pad=0+doubt=-0.5,pad=5+doubt=-0.5,pad=5+doubt=-0.5+max=12,pad=8+doubt=-0.5+max=12
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import jiwer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.wer import normalise  # noqa: E402
from voxlane.audio.decode import decode_audio  # noqa: E402
from voxlane.audio.features import FRAMES_PER_SECOND  # noqa: E402
from voxlane.audio.pipeline import window_features  # noqa: E402
from voxlane.audio.split import WindowCutter  # noqa: E402
from voxlane.config import EngineConfig, default_model_path  # noqa: E402
from voxlane.messages import TranscribeOptions, WindowRequest  # noqa: E402
from voxlane.runners import base, whisper  # noqa: E402
from voxlane.runners.base import WindowPass  # noqa: E402
from voxlane.runners.whisper import WhisperRunner  # noqa: E402


def parse(config: str) -> tuple[float, float | None, float, int]:
    parts = dict(p.split("=") for p in config.split("+"))
    doubt = float(parts["doubt"]) if "doubt" in parts else None
    return float(parts.get("pad", 0)), doubt, float(parts.get("max", base.SHORT_MAX_S)), int(parts.get("beam", 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared/data/dev/manifest.jsonl"))
    parser.add_argument("--piece-s", type=float, default=12.0)
    parser.add_argument("--configs", default="pad=0,pad=5,pad=10,pad=0+doubt=-0.5,pad=5+doubt=-0.5")
    parser.add_argument("--rounds", type=int, default=1, help="each configuration this many times, in turn")
    parser.add_argument("--short-files", action="store_true", help="the files of 15 s or less too, whole")
    parser.add_argument("--texts", help="write each configuration's piece texts to this JSON file")
    args = parser.parse_args()
    runner = WhisperRunner.load(EngineConfig(model_path=str(default_model_path()), engine_workers=1))
    manifest = Path(args.dataset)
    files = []
    for line in manifest.read_text().splitlines():
        row = json.loads(line)
        if row["duration_s"] > 30:
            pcm = decode_audio((manifest.parent / row["audio"]).read_bytes(), 3600.0).samples
            cutter = WindowCutter(16000, window_s=args.piece_s, search_s=min(4.0, args.piece_s / 2))
            pieces = [p for _, p in cutter.feed(pcm)] + [p for _, p in cutter.finish()]
            files.append((Path(row["audio"]).name, row["text"], [window_features(p, 80, 0.0) for p in pieces]))
        elif args.short_files and row["duration_s"] <= 15:
            pcm = decode_audio((manifest.parent / row["audio"]).read_bytes(), 3600.0).samples
            files.append((Path(row["audio"]).name, row["text"], [window_features(pcm, 80, 0.0)]))
    configs = list(dict.fromkeys(args.configs.split(",")))
    totals = {c: [0, 0, 0, 0] for c in configs}
    times = {c: [] for c in configs}
    per_file: dict[str, dict[str, str]] = {c: {} for c in configs}
    texts_of: dict[str, dict[str, list[str]]] = {c: {} for c in configs}
    for _ in range(args.rounds):
        for config in configs:
            pad_s, doubt, max_s, beam_size = parse(config)
            base.SHORT_MAX_S = whisper.SHORT_MAX_S = max_s
            runner.options = replace(
                runner.options,
                beam_size=beam_size,
                doubt_beam_size=5 if doubt is not None else 0,
                doubt_log_prob=doubt if doubt is not None else -0.5,
                short_pad_frames=round(pad_s * FRAMES_PER_SECOND),
            )
            started = time.perf_counter()
            score = [0, 0, 0, 0]
            for name, ref, pieces in files:
                texts = []
                for features, n_frames, speech in pieces:
                    msg = WindowRequest(
                        "r", 0, 1, 0.0, n_frames / FRAMES_PER_SECOND, n_frames, 80, TranscribeOptions(), speech
                    )
                    (out,) = runner.run([WindowPass(msg, features)])
                    texts.append("".join(s.text for s in out.result.segments))
                w = jiwer.process_words(normalise(ref), normalise(" ".join(texts)))
                score = [score[0] + w.substitutions, score[1] + w.deletions, score[2] + w.insertions,
                         score[3] + len(normalise(ref).split())]  # fmt: skip
                per_file[config][name] = f"{w.substitutions}/{w.deletions}/{w.insertions}"
                texts_of[config][name] = texts
            times[config].append(time.perf_counter() - started)
            totals[config] = score
            wer = 100 * sum(score[:3]) / score[3]
            print(f"  {config}: {wer:.2f}% ({score[0]}/{score[1]}/{score[2]}) in {times[config][-1]:.1f} s", flush=True)
    n_pieces = sum(len(p) for _, _, p in files)
    print(f"{n_pieces} pieces of at most {args.piece_s:g} s from {len(files)} files")
    print(f"{'config':<22}{'WER':>8}  sub/del/ins  seconds")
    for config in configs:
        s, d, i, n = totals[config]
        print(
            f"{config:<22}{100 * (s + d + i) / n:>7.2f}%  {s}/{d}/{i}  {', '.join(f'{t:.1f}' for t in times[config])}"
        )
    print(json.dumps(per_file, indent=1))
    if args.texts:
        Path(args.texts).write_text(json.dumps(texts_of, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
