#!/usr/bin/env python3
"""Short clips decoded alone (each in its own 30 s window) against the same clips sharing windows, offline,
with the bundled Whisper (docs/asr-engine.md, "Windows shared by short clips").

Modes:
  split   one decode per pack (the clips' log-mel frames one after the other, --gap-s of silence between
          them, normalised together), its segments handed to the clip whose audio each overlaps most; a pack
          is unclean (its clips keep their lone text) when a segment overlaps a second clip's audio by
          --overlap-s or more, a clip gets no text, or the decode stops before the last clip;
  forced  one encoder pass per pack, one decode per clip from a forced timestamp at its start, cut at the
          first timestamp past its end;
  short   no packs: each clip encoded on its own frames plus --pad-s of silence instead of 30 s.

    .venv/bin/python benchmarks/pack_offline.py --mode split --gap-s 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import ctranslate2
import jiwer
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.wer import normalise  # noqa: E402
from voxlane.audio.decode import decode_audio  # noqa: E402
from voxlane.audio.features import FRAMES_PER_SECOND, N_FRAMES  # noqa: E402
from voxlane.audio.pipeline import window_features  # noqa: E402
from voxlane.config import EngineConfig, default_model_path  # noqa: E402
from voxlane.messages import Segment, TranscribeOptions, WindowRequest  # noqa: E402
from voxlane.runners.base import WindowPass  # noqa: E402
from voxlane.runners.whisper import WhisperRunner  # noqa: E402

Clip = tuple[str, str, np.ndarray, int]  # name, reference, features (80 x 3000), frames with audio


def load_clips(manifest: Path, max_duration_s: float) -> list[Clip]:
    clips = []
    for line in manifest.read_text().splitlines():
        row = json.loads(line)
        if row["duration_s"] <= max_duration_s and row["text"]:
            pcm = decode_audio((manifest.parent / row["audio"]).read_bytes(), 60.0).samples
            features, n_frames, _ = window_features(pcm, 80, 0.0)
            clips.append((Path(row["audio"]).name, row["text"], features, n_frames))
    return clips


def text_of(segments: list[Segment]) -> str:
    return "".join(s.text for s in segments).strip()


def decode(runner: WhisperRunner, features: np.ndarray, n_frames: int) -> tuple[list[Segment], float | None]:
    duration_s = n_frames / FRAMES_PER_SECOND
    msg = WindowRequest("r", 0, 1, 0.0, duration_s, n_frames, 80, TranscribeOptions(), None)
    (out,) = runner.run([WindowPass(msg, features)])
    return out.result.segments, out.resume_s


def pack(members: list[Clip], gap_s: float) -> tuple[np.ndarray, int, list[tuple[float, float]]]:
    """The members' frames one after the other with ``gap_s`` of silence between, normalised as one window
    (the floor of the loudest member), and each member's (start, end) in seconds."""
    floor = max(float(m[2].max()) for m in members) - 2.0
    out = np.full((80, N_FRAMES), floor, dtype=np.float32)
    at, spans, gap = 0, [], int(gap_s * FRAMES_PER_SECOND)
    for _, _, features, n in members:
        out[:, at : at + n] = features[:, :n]
        spans.append((at / FRAMES_PER_SECOND, (at + n) / FRAMES_PER_SECOND))
        at += n + gap
    return np.maximum(out, floor), min(N_FRAMES, at - gap), spans


def split(segments: list[Segment], spans: list[tuple[float, float]], overlap_s: float) -> list[str] | None:
    """Each segment to the member whose audio it overlaps most (the nearest when none); None when one
    overlaps another member's audio by ``overlap_s`` or more."""
    got: list[list[str]] = [[] for _ in spans]
    for s in segments:
        overlaps = [max(0.0, min(s.end, e) - max(s.start, b)) for b, e in spans]
        k = max(range(len(spans)), key=lambda i: overlaps[i])
        if overlaps[k] == 0.0:
            k = min(range(len(spans)), key=lambda i: abs(sum(spans[i]) / 2 - (s.start + s.end) / 2))
        if any(o >= overlap_s for i, o in enumerate(overlaps) if i != k):
            return None
        got[k].append(s.text)
    return ["".join(g).strip() for g in got]


def forced(runner: WhisperRunner, features: np.ndarray, spans: list[tuple[float, float]]) -> list[str]:
    tok = runner.tokenizer("transcribe", "en")
    encoded = np.array(runner.model.encode(ctranslate2.StorageView.from_array(features[None])))
    rows = ctranslate2.StorageView.from_array(np.ascontiguousarray(np.repeat(encoded, len(spans), axis=0)))
    prompts = [[*tok.sot_sequence, tok.timestamp_begin + round(b / 0.02)] for b, _ in spans]
    longest = max(e - b for b, e in spans)
    outs = runner.decoder.generate(rows, prompts, max_length=len(prompts[0]) + 8 * int(np.ceil(longest)) + 8)
    texts = []
    for (_, end), out in zip(spans, outs):
        kept: list[int] = []
        pending: list[int] = []
        for t in out.sequences_ids[0]:
            if t >= tok.timestamp_begin:
                if (t - tok.timestamp_begin) * 0.02 > end + 0.3:
                    break
                kept += pending
                pending = []
            elif t < tok.eot:
                pending.append(t)
        else:
            kept += pending
        texts.append(tok.decode(kept).strip())
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared/data/dev/manifest.jsonl"))
    parser.add_argument("--mode", choices=("split", "forced", "short"), default="split")
    parser.add_argument("--max-duration-s", type=float, default=15.0)
    parser.add_argument("--gap-s", type=float, default=1.0)
    parser.add_argument("--overlap-s", type=float, default=0.3)
    parser.add_argument("--pad-s", type=float, default=5.0)
    parser.add_argument("--orders", type=int, default=6)
    args = parser.parse_args()
    runner = WhisperRunner.load(EngineConfig(model_path=str(default_model_path()), engine_workers=1))
    clips = load_clips(Path(args.dataset), args.max_duration_s)
    refs = {c[0]: c[1] for c in clips}

    def errors(texts: dict[str, str]) -> tuple[int, int, int]:
        m = jiwer.process_words(
            " ".join(normalise(refs[k]) for k in texts), " ".join(normalise(texts[k]) for k in texts)
        )
        return m.substitutions, m.deletions, m.insertions

    t0 = time.perf_counter()
    alone = {c[0]: text_of(decode(runner, c[2], c[3])[0]) for c in clips}
    print(f"{len(clips)} clips alone: sub/del/ins {errors(alone)}, {time.perf_counter() - t0:.1f} s")
    if args.mode == "short":
        t0 = time.perf_counter()
        texts = {}
        for name, _, features, n in clips:
            width = min(N_FRAMES, n + int(args.pad_s * FRAMES_PER_SECOND))
            texts[name] = text_of(decode(runner, np.ascontiguousarray(features[:, :width]), n)[0])
        print(f"own frames + {args.pad_s:g} s: sub/del/ins {errors(texts)}, {time.perf_counter() - t0:.1f} s")
        return 0
    rng = np.random.default_rng(0)
    for order in range(args.orders):
        packs: list[list[Clip]] = [[]]
        length = 0.0
        for i in rng.permutation(len(clips)):
            d = clips[i][3] / FRAMES_PER_SECOND
            if packs[-1] and length + args.gap_s + d > 29.0:
                packs.append([])
                length = 0.0
            length += (args.gap_s if packs[-1] else 0.0) + d
            packs[-1].append(clips[i])
        texts, unclean = {}, 0
        for members in packs:
            features, n, spans = pack(members, args.gap_s)
            if args.mode == "forced":
                parts: list[str] | None = forced(runner, features, spans)
            else:
                segments, resume_s = decode(runner, features, n)
                parts = split(segments, spans, args.overlap_s)
                if parts is not None and (any(not p for p in parts) or (resume_s or 1e9) < spans[-1][0]):
                    parts = None
            if parts is None or len(members) == 1:
                unclean += len(members) > 1
                parts = [alone[m[0]] for m in members]
            texts.update({m[0]: p for m, p in zip(members, parts)})
        sizes = [len(p) for p in packs]
        print(f"order {order}: packs {sizes}, unclean {unclean} of {sum(s > 1 for s in sizes)}, "
              f"sub/del/ins {errors(texts)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
