"""Text normalisation, measured by ear: each sentence of a set such as benchmarks/data/normalisation.jsonl
(numbers, money, dates, times, units, phone numbers, addresses, abbreviations as written) is spoken by
POST /v1/audio/speech (wav), the audio transcribed by POST /v1/audio/transcriptions of this checkout's
server, and the transcripts scored against the sentences as a person would say them (``spoken``) with
voxlane.bench.wer.

Two ears, both this checkout's Whisper, hear every clip:
- ``digits``: Whisper as it is, scored with Whisper's English normaliser. Whisper writes numbers as digits and
  the normaliser makes "twenty twenty-four" and "2024" one word, so this score cannot tell readings apart
  that end in the same digits ("two thousand twenty-four" and "twenty twenty-four" both score 0).
- ``words``: Whisper prompted with numbers written as words (``WORDS_PROMPT``), so it writes what it heard
  ("five dollars and fifty cents", "dollar five point five zero", "five k m"), scored against the sentence
  as said after ``words_normaliser`` (case and punctuation only; digits it still writes become their plain
  cardinal or ordinal words): a reading a listener hears as wrong is an error here.

A server of this checkout's code starts on 127.0.0.1 and speaks the set; with ``--peer URL`` another
OpenAI-compatible server (e.g. speaches) speaks it too, in the same run, heard by the same ear, the passes
alternating (A B B A); with ``--compare-code DIR`` a server of the code in DIR (``PYTHONPATH=DIR``) speaks and
hears it. One table compares them.

    .venv/bin/python benchmarks/tts_roundtrip.py --data benchmarks/data/normalisation.jsonl --repeats 2 \
        [--peer http://127.0.0.1:8432 --peer-model speaches-ai/piper-en_US-joe-medium --peer-voice joe] \
        [--compare-code /path/to/other/checkout] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voxlane.bench import wer
from voxlane.bench.server import running_server
from voxlane.text.numbers import LARGEST, cardinal, digits, ordinal, year

ROOT = Path(__file__).resolve().parent.parent
WORDS_PROMPT = (
    "Numbers are written out as words: twenty twenty-four, five dollars and fifty cents, three thirty p m, "
    "forty-eight thousand six hundred, five kilometers, the third of March."
)
"""A prompt that makes Whisper write numbers as the words it heard instead of digits."""
EARS = ("digits", "words")


@dataclass(frozen=True)
class Speaker:
    """A server that speaks: its base URL and the model and voice to ask for."""

    label: str
    base_url: str
    model: str
    voice: str


_WRITTEN = {
    "dr": ("doctor",),
    "mr": ("mister",),
    "mrs": ("missus",),
    "ms": ("miz",),
    "prof": ("professor",),
    "st": ("saint", "street"),
    "etc": ("et cetera",),
    "vs": ("versus",),
    "www": ("w w w",),
    "am": ("am", "a m"),
    "pm": ("p m",),
}
"""How Whisper writes words it heard (abbreviations, "www"), and the words each may stand for."""
_SYMBOLS = {".": " dot ", "@": " at ", "/": " slash "}


def words_normaliser(text: str) -> str:
    """Case and punctuation only (a hyphen is a space)."""
    return wer.basic_normaliser(text)


def _plural(words: str) -> str:
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def _number_readings(m: re.Match[str]) -> list[str]:
    """The ways a number Whisper wrote as digits may have been said, the plain cardinal first."""
    whole, fraction, suffix = m[1].replace(",", ""), m[2], m[3]
    if len(whole) > len(str(LARGEST)):
        return [digits(whole)]
    n = int(whole)
    if suffix == "s":  # a decade, "1980s"
        return [_plural(year(n)), _plural(cardinal(n))]
    if suffix:
        return [ordinal(n)]
    if fraction:  # "3.14", or Whisper's "9.30" for a time
        return [f"{cardinal(n)} point {digits(fraction)}", f"{cardinal(n)} {cardinal(int(fraction))}"]
    return [cardinal(n), year(n), ordinal(n), digits(whole)]


def heard_as_said(hypothesis: str, reference: str) -> str:
    """``hypothesis`` with what Whisper writes in symbols, abbreviations and digits put back into words, each
    as the reference says it when one of its readings does ("1999" is "nineteen ninety-nine" against a
    reference that says so, "one thousand nine hundred ninety-nine" against one that says that) and its plain
    reading otherwise: the digits do not show which reading was heard, so none counts against the speaker."""
    said = f" {words_normaliser(reference)} "

    def choose(readings: list[str]) -> str:
        return next((r for r in readings if f" {words_normaliser(r)} " in said), readings[0])

    text = re.sub(r"(?<=[A-Za-z]{2})([.@/])(?=[A-Za-z]{2})", lambda m: _SYMBOLS[m[1]], hypothesis)
    text = re.sub(r"(\d)(?!(?:st|nd|rd|th|s)\b)(?=[A-Za-z])", r"\1 ", text)  # "9.30am", "5km"
    text = re.sub(r"(\d[\d,]*)(?:\.(\d+))?(st|nd|rd|th|s)?\b", lambda m: f" {choose(_number_readings(m))} ", text)
    words = words_normaliser(text).split()
    return " ".join(choose(list(_WRITTEN[w])) if w in _WRITTEN else w for w in words)


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _round_trip(speaker: Speaker, ear_url: str, text: str) -> dict[str, str]:
    """``text`` spoken as wav by ``speaker``, then heard by the ear at ``ear_url``, plain and prompted."""
    with httpx.Client(timeout=300) as client:
        speech = client.post(
            f"{speaker.base_url}/v1/audio/speech",
            json={"model": speaker.model, "voice": speaker.voice, "input": text, "response_format": "wav"},
        )
        speech.raise_for_status()
        heard = {}
        for ear in EARS:
            data = {"model": "whisper-1", **({"prompt": WORDS_PROMPT} if ear == "words" else {})}
            result = client.post(
                f"{ear_url}/v1/audio/transcriptions",
                data=data,
                files={"file": ("speech.wav", speech.content, "audio/wav")},
            )
            result.raise_for_status()
            heard[ear] = result.json()["text"]
    return heard


def speak_and_hear(speaker: Speaker, ear_url: str, texts: list[str], concurrency: int) -> list[dict[str, str]]:
    """Each text spoken and heard, ``concurrency`` at a time (the figures are words, not speed)."""
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda text: _round_trip(speaker, ear_url, text), texts))


def _as_scored(ear: str, heard: str, spoken: str) -> str:
    return heard_as_said(heard, spoken) if ear == "words" else heard


def score(label: str, rows: list[dict[str, str]], passes: list[list[dict[str, str]]]) -> dict[str, Any]:
    """Scores summed over the passes (the voice samples its noise afresh each time, so one pass moves the
    WER by a point or two), per ear, overall and by kind."""
    normalisers = {"digits": wer.text_normaliser()[1], "words": words_normaliser}
    result: dict[str, Any] = {"label": label, "sentences": len(rows), "repeats": len(passes), "ears": {}}
    for ear, normalise in normalisers.items():
        total, by_kind, heard = wer.Score(), dict[str, wer.Score](), []
        for i, row in enumerate(rows):
            scores = [wer.score(row["spoken"], _as_scored(ear, p[i][ear], row["spoken"]), normalise) for p in passes]
            for s in scores:
                total += s
                by_kind.setdefault(row.get("kind", "-"), wer.Score()).__iadd__(s)
            heard.append(
                {
                    "kind": row.get("kind", "-"),
                    "text": row["text"],
                    "spoken": row["spoken"],
                    "heard": [p[i][ear] for p in passes],
                    "errors": sum(s.errors for s in scores),
                }
            )
        result["ears"][ear] = {
            **total.as_dict(),
            "by_kind": {kind: s.as_dict() for kind, s in by_kind.items()},
            "heard": heard,
        }
    return result


def _cell(s: dict[str, Any]) -> str:
    return f"{s['wer']:.3f} ({s['sub']}/{s['del']}/{s['ins']})"


def report(results: list[dict[str, Any]], rows: list[dict[str, str]], args: argparse.Namespace) -> None:
    print(
        f"{len(rows)} sentences of {args.data.name} x {args.repeats}; digits ear: Whisper + "
        f"{wer.text_normaliser()[0]}; words ear: Whisper prompted for words + words_normaliser"
    )
    for ear in EARS:
        print(f"\n{ear} ear\n| speaker | words | sub | del | ins | WER |\n|---|---|---|---|---|---|")
        for r in results:
            s = r["ears"][ear]
            print(f"| {r['label']} | {s['words']} | {s['sub']} | {s['del']} | {s['ins']} | {s['wer']:.3f} |")
        kinds = list(results[0]["ears"][ear]["by_kind"])
        print(f"\n{ear} ear, WER (sub/del/ins) by kind:\n| kind | " + " | ".join(r["label"] for r in results) + " |")
        print("|---|" + "---|" * len(results))
        for kind in kinds:
            print(f"| {kind} | " + " | ".join(_cell(r["ears"][ear]["by_kind"][kind]) for r in results) + " |")
    for r in results:
        for ear in EARS:
            print(f"\nworst of {r['label']}, {ear} ear:")
            for w in sorted(r["ears"][ear]["heard"], key=lambda w: -w["errors"])[: args.worst]:
                print(f"  {w['errors']:2d}  {w['text']}\n      heard: {' | '.join(w['heard'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="JSON lines with text, spoken and kind")
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--repeats", type=int, default=1, help="speak the set this many times per speaker")
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0: all)")
    parser.add_argument("--concurrency", type=int, default=2, help="round trips in flight at once")
    parser.add_argument("--peer", help="base URL of another OpenAI-compatible server that speaks the set too")
    parser.add_argument("--peer-model", default="speaches-ai/piper-en_US-joe-medium")
    parser.add_argument("--peer-voice", default="joe")
    parser.add_argument("--peer-label", default="speaches")
    parser.add_argument("--compare-code", type=Path, help="also run a server of the code in this directory")
    parser.add_argument("--worst", type=int, default=5, help="print this many worst sentences per speaker and ear")
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--rescore", type=Path, help="score the transcripts of a --json file again, speaking nothing")
    args = parser.parse_args()
    rows = load(args.data)[: args.limit or None]
    if args.rescore:
        results = [score(r["label"], rows, saved_passes(r)) for r in json.loads(args.rescore.read_text())]
        args.repeats = results[0]["repeats"]
    else:
        results = measure(args, rows)
    report(results, rows, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def saved_passes(result: dict[str, Any]) -> list[list[dict[str, str]]]:
    """The transcripts of a result written by ``--json``, as ``speak_and_hear`` returned them."""
    ears = result["ears"]
    return [
        [{ear: ears[ear]["heard"][i]["heard"][p] for ear in EARS} for i in range(result["sentences"])]
        for p in range(result["repeats"])
    ]


def measure(args: argparse.Namespace, rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    texts = [r["text"] for r in rows]
    with running_server(env={"PYTHONPATH": str(ROOT)}) as srv:
        speakers = [Speaker("voxlane", srv.base_url, "tts-1", args.voice)]
        if args.peer:
            speakers.append(Speaker(args.peer_label, args.peer.rstrip("/"), args.peer_model, args.peer_voice))
        passes: dict[str, list[list[dict[str, str]]]] = {s.label: [] for s in speakers}
        for repeat in range(args.repeats):
            for speaker in speakers if repeat % 2 == 0 else speakers[::-1]:
                passes[speaker.label].append(speak_and_hear(speaker, srv.base_url, texts, args.concurrency))
        results = [score(s.label, rows, passes[s.label]) for s in speakers]
    if args.compare_code:
        with running_server(env={"PYTHONPATH": str(args.compare_code)}) as other:
            speaker = Speaker(str(args.compare_code), other.base_url, "tts-1", args.voice)
            other_passes = [
                speak_and_hear(speaker, other.base_url, texts, args.concurrency) for _ in range(args.repeats)
            ]
        results.append(score(speaker.label, rows, other_passes))
    return results


if __name__ == "__main__":
    main()
