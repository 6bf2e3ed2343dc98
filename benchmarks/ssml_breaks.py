"""SSML break gaps, asked against heard: each break time and strength between two sentences, spoken by
POST /v1/audio/speech (wav) on a server of this checkout, and the gap measured on the returned PCM from the
last sound before the break to the first after it (the longest run of 10 ms frames below -40 dBFS RMS
between two louder ones). The same two sentences without a break give the voice's own sentence pause.

    .venv/bin/python benchmarks/ssml_breaks.py --repeats 3 [--times-ms 100 250 500 1000 1500 3000]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import wave
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voxlane.audio.gaps import longest_quiet_s
from voxlane.bench.server import running_server
from voxlane.text.ssml import STRENGTH_S

ROOT = Path(__file__).resolve().parent.parent


def longest_gap_s(wav: bytes) -> float:
    """The longest run of quiet 10 ms frames between two loud ones (audio/gaps.py ``longest_quiet_s``)."""
    with wave.open(io.BytesIO(wav)) as reader:
        rate = reader.getframerate()
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), dtype=np.int16)
    return longest_quiet_s(pcm, rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--times-ms", type=int, nargs="+", default=[100, 250, 500, 1000, 1500, 3000])
    parser.add_argument("--strengths", nargs="+", default=[s for s in STRENGTH_S if s != "none"])
    parser.add_argument("--repeats", type=int, default=3, help="requests per break (the voice's noise varies)")
    parser.add_argument("--voice", default="joe")
    parser.add_argument("--before", default="One two three.")
    parser.add_argument("--after", default="Four five six.")
    args = parser.parse_args()
    cases: list[tuple[str, float | None, str]] = [("no break (sentence pause)", None, f"{args.before} {args.after}")]
    cases += [
        (f'time="{ms}ms"', ms / 1000, f'<speak>{args.before} <break time="{ms}ms"/> {args.after}</speak>')
        for ms in args.times_ms
    ]
    cases += [
        (f'strength="{s}"', STRENGTH_S[s], f'<speak>{args.before} <break strength="{s}"/> {args.after}</speak>')
        for s in args.strengths
    ]
    with running_server(env={"PYTHONPATH": str(ROOT)}) as srv, httpx.Client(base_url=srv.base_url, timeout=120) as c:
        print(f'"{args.before} <break/> {args.after}", voice {args.voice}, {args.repeats} requests each')
        print("| break | asked (s) | heard mean (s) | min | max | worst error |\n|---|---|---|---|---|---|")
        for label, asked_s, text in cases:
            gaps = []
            for _ in range(args.repeats):
                response = c.post(
                    "/v1/audio/speech",
                    json={"model": "tts-1", "voice": args.voice, "input": text, "response_format": "wav"},
                )
                response.raise_for_status()
                gaps.append(longest_gap_s(response.content))
            worst = ""
            if asked_s is not None:
                farthest = max(gaps, key=lambda g: abs(g - asked_s))
                worst = f"{(farthest - asked_s) / asked_s:+.0%}"
            asked = "-" if asked_s is None else f"{asked_s:.2f}"
            print(f"| {label} | {asked} | {statistics.mean(gaps):.3f} | {min(gaps):.2f} | {max(gaps):.2f} | {worst} |")


if __name__ == "__main__":
    main()
