"""Does noise reduction before Whisper help? WER of the dev set under added noise, with and without
voxlane's spectral gate (voxlane.audio.denoise), decoded by faster-whisper on the bundled model.

    .venv/bin/python benchmarks/noise_reduction.py [--snr-db 10 --snr-db 0]

For each file and each condition (clean, white noise at each SNR), the audio is decoded as it is and after
the gate at each strength (near_field, far_field), greedy, without VAD. Prints WER with S/D/I per condition and
arm. This is the measurement behind the realtime endpoint's ``noise_reduction`` (docs/realtime.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from voxlane.audio.decode import decode_audio
from voxlane.audio.denoise import STRENGTHS, spectral_gate
from voxlane.bench.accuracy import Score, score
from voxlane.bench.metrics import text_normaliser
from voxlane.config import default_model_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="../shared/data/dev/manifest.jsonl")
    parser.add_argument("--snr-db", type=float, action="append", help="noise levels (default: 10 and 0 dB)")
    parser.add_argument("--max-duration-s", type=float, default=60.0, help="files up to this long (default 60)")
    args = parser.parse_args()
    from faster_whisper import WhisperModel

    model = WhisperModel(str(default_model_path()), device="cpu", compute_type="int8", cpu_threads=2)
    manifest = Path(args.dataset)
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["duration_s"] <= args.max_duration_s]
    _, normalise = text_normaliser()
    conditions = ["clean", *(f"{snr:g} dB" for snr in args.snr_db or [10.0, 0.0])]
    arms = ["as it is", *STRENGTHS]
    scores = {(c, a): Score() for c in conditions for a in arms}
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for row in rows:
        pcm = decode_audio((manifest.parent / row["audio"]).read_bytes(), 3600.0).samples
        for condition in conditions:
            audio = pcm
            if condition != "clean":
                snr = float(condition.split()[0])
                noise = rng.standard_normal(len(pcm)).astype(np.float32)
                audio = pcm + noise * np.sqrt(np.mean(pcm**2) / 10 ** (snr / 10))
            for arm in arms:
                heard = audio if arm == "as it is" else spectral_gate(audio, arm)
                segments, _ = model.transcribe(heard, beam_size=1, language="en", vad_filter=False)
                scores[condition, arm] += score(row["text"], "".join(s.text for s in segments), normalise)
    print(f"{len(rows)} files up to {args.max_duration_s:g} s, {time.perf_counter() - start:.0f} s")
    print("| audio | noise reduction | words | WER | S | D | I |\n|---|---|---|---|---|---|---|")
    for (condition, arm), s in scores.items():
        print(f"| {condition} | {arm} | {s.words} | {100 * s.wer:.2f}% | {s.sub} | {s.dels} | {s.ins} |")


if __name__ == "__main__":
    main()
