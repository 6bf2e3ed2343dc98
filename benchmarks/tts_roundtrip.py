"""Text normalisation, measured by ear: each sentence of a set such as benchmarks/data/normalisation.jsonl
(numbers, money, dates, times, units, phone numbers, addresses, abbreviations as written) is spoken by
POST /v1/audio/speech (wav), the audio transcribed by POST /v1/audio/transcriptions on the same server, and
the transcripts scored against the sentences as a person would say them (``spoken``) with voxlane.bench.wer (Whisper's
English normaliser: "twenty twenty-four" and "2024" count alike).

A server of this checkout's code starts on 127.0.0.1, then, with ``--compare-code DIR``, one of the code in
DIR (``PYTHONPATH=DIR``; e.g. a checkout without the verbaliser), and one table compares the two.

    .venv/bin/python benchmarks/tts_roundtrip.py --data benchmarks/data/normalisation.jsonl \
        [--compare-code /path/to/other/checkout] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voxlane.bench import wer
from voxlane.bench.server import running_server

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def transcribe_spoken(base_url: str, texts: list[str], voice: str) -> list[str]:
    """Each text spoken as wav and transcribed again, one at a time (the figures are words, not speed)."""
    hypotheses = []
    with httpx.Client(base_url=base_url, timeout=300) as client:
        for text in texts:
            speech = client.post(
                "/v1/audio/speech", json={"model": "tts-1", "voice": voice, "input": text, "response_format": "wav"}
            )
            speech.raise_for_status()
            result = client.post(
                "/v1/audio/transcriptions",
                data={"model": "whisper-1"},
                files={"file": ("speech.wav", speech.content, "audio/wav")},
            )
            result.raise_for_status()
            hypotheses.append(result.json()["text"])
    return hypotheses


def run(label: str, rows: list[dict[str, str]], voice: str, code: Path, repeats: int) -> dict[str, Any]:
    """The set spoken ``repeats`` times by one server (the voice samples its noise afresh each time, so one
    pass moves the WER by a point or two); scores summed over the passes."""
    with running_server(env={"PYTHONPATH": str(code)}) as srv:
        passes = [transcribe_spoken(srv.base_url, [r["text"] for r in rows], voice) for _ in range(repeats)]
    name, normalise = wer.text_normaliser()
    total, by_kind, heard = wer.Score(), dict[str, wer.Score](), []
    for i, row in enumerate(rows):
        scores = [wer.score(row["spoken"], hypotheses[i], normalise) for hypotheses in passes]
        for score in scores:
            total += score
            by_kind.setdefault(row.get("kind", "-"), wer.Score()).__iadd__(score)
        heard.append(
            {
                "kind": row.get("kind", "-"),
                "text": row["text"],
                "heard": [hypotheses[i] for hypotheses in passes],
                "errors": sum(s.errors for s in scores),
            }
        )
    return {
        "label": label,
        "code": str(code),
        "sentences": len(rows),
        "repeats": repeats,
        "normaliser": name,
        **total.as_dict(),
        "by_kind": {kind: score.as_dict() for kind, score in by_kind.items()},
        "heard": heard,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="JSON lines with text, spoken and kind")
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--repeats", type=int, default=1, help="speak the set this many times per server")
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0: all)")
    parser.add_argument("--compare-code", type=Path, help="also run a server of the code in this directory")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    rows = load(args.data)[: args.limit or None]
    results = [run("this checkout", rows, args.voice, ROOT, args.repeats)]
    if args.compare_code:
        results.append(run(str(args.compare_code), rows, args.voice, args.compare_code, args.repeats))
    print(
        f"{len(rows)} sentences of {args.data.name} x {args.repeats}, voice {args.voice}; "
        f"normaliser: {results[0]['normaliser']}"
    )
    print("| code | words | sub | del | ins | WER |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['label']} | {r['words']} | {r['sub']} | {r['del']} | {r['ins']} | {r['wer']:.3f} |")
    kinds = list(results[0]["by_kind"])
    print("\nWER by kind:\n| kind | " + " | ".join(str(r["label"]) for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for kind in kinds:
        print(f"| {kind} | " + " | ".join(f"{r['by_kind'][kind]['wer']:.3f}" for r in results) + " |")
    for r in results:
        print(f"\nworst of {r['label']}:")
        for w in sorted(r["heard"], key=lambda w: -w["errors"])[:5]:
            print(f"  {w['errors']:2d}  {w['text']}\n      heard: {' | '.join(w['heard'])}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
