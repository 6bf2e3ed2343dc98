"""Does ``keywords[]`` help? WER of the dev set with and without keywords in the decoder's prompt.

    .venv/bin/voxlane serve --port 8000 &
    .venv/bin/python benchmarks/keywords.py --url http://127.0.0.1:8000/v1 \
        --keyword "Montreal Forced Aligner"

Every file is transcribed twice, A B B A over the set (without, with, with, without), one request at a time.
The WER (S/D/I) is reported apart for the files whose reference holds a keyword's words (where it should
help) and the others (where a prompt can only hurt: words of the prompt read into the audio).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from openai import OpenAI

from voxlane.bench.accuracy import Score, score
from voxlane.bench.metrics import text_normaliser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--dataset", default="../shared/data/dev/manifest.jsonl")
    parser.add_argument("--keyword", action="append", required=True, help="a keyword (repeat for several)")
    parser.add_argument("--api-key", default="none")
    args = parser.parse_args()

    client = OpenAI(base_url=args.url, api_key=args.api_key)
    manifest = Path(args.dataset)
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    _, normalise = text_normaliser()
    keyword_words = {w for k in args.keyword for w in normalise(k).split()}

    def transcribe(row: dict, keywords: list[str]) -> str:
        with open(manifest.parent / row["audio"], "rb") as f:
            return client.audio.transcriptions.create(model="whisper-1", file=f, keywords=keywords).text

    scores = {(group, arm): Score() for group in ("with the keyword", "without it") for arm in ("plain", "keywords")}
    start = time.perf_counter()
    for arms in (("plain", "keywords"), ("keywords", "plain")):
        for row in rows:
            group = "with the keyword" if keyword_words & set(normalise(row["text"]).split()) else "without it"
            for arm in arms:
                text = transcribe(row, args.keyword if arm == "keywords" else [])
                scores[group, arm] += score(row["text"], text, normalise)
    print(
        f"{len(rows)} files, each twice per arm (A B B A), {time.perf_counter() - start:.0f} s; keywords {args.keyword}"
    )
    print("| files | arm | words | WER | S | D | I |\n|---|---|---|---|---|---|---|")
    for (group, arm), s in scores.items():
        print(f"| {group} | {arm} | {s.words} | {100 * s.wer:.2f}% | {s.sub} | {s.dels} | {s.ins} |")


if __name__ == "__main__":
    main()
