"""Live finals with and without the previous turns as context, offline: no server, no timing.

Each long dev-set file (60-200 s) is cut into turns as a live session with server_vad's defaults cuts it
(``LiveInput``: Silero, 500 ms of silence; a turn reads back to the previous turn's end, at most 10 s),
and each turn is decoded by the bundled Whisper (greedy, no timestamps) in three ways: alone; after the
audio of the previous turns that end where it starts (at most 10 s / 3 turns, and 20 s / 6 turns), their
text (as this same method read them) forced as the start of the transcript. A decode that loops
(compression ratio > 2.4) is read again alone. Prints WER (S/D/I) per file and over all, and the time
each way took. ``--contiguous`` starts every turn where the previous one ended (as a live session's
pieces do when speech is never far apart); ``--beam-size`` decodes with a beam (``--realtime-beam-size``).
This is how ``CONTEXT_S`` (server/realtime/session.py) was chosen (docs/benchmarks.md, "Finals read on
from the previous turns", and its seventh round).

    .venv/bin/python benchmarks/realtime_context.py [--dataset ../shared/data/dev/manifest.jsonl]
        [--contiguous] [--beam-size 1]
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ctranslate2
import jiwer
import numpy as np
import tokenizers
from faster_whisper.tokenizer import Tokenizer

from voxlane.audio.decode import decode_audio, to_float
from voxlane.audio.features import log_mel
from voxlane.audio.live import LiveInput
from voxlane.bench.metrics import text_normaliser
from voxlane.config import default_model_path
from voxlane.server.realtime.events import SessionSettings

SR = 16000
WAYS = {"alone": (0, 0), "10 s / 3 turns": (10, 3), "20 s / 6 turns": (20, 6)}


class Reader:
    def __init__(self, beam_size: int = 1) -> None:
        self.beam_size = beam_size
        path = default_model_path()
        self.model = ctranslate2.models.Whisper(str(path), device="cpu", compute_type="int8", intra_threads=2)
        hf = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok = Tokenizer(hf, False, task="transcribe", language="en")

    def read(self, pcm: np.ndarray, prefix: str | None = None) -> str | None:
        """Text of ``pcm`` (at most 30 s) after ``prefix``; None if the decode loops."""
        features, _ = log_mel(to_float(pcm), 80)
        encoded = self.model.encode(ctranslate2.StorageView.from_array(features[None]))
        forced = self.tok.encode(" " + prefix.strip()) if prefix else []
        prompt = [*self.tok.sot_sequence, self.tok.no_timestamps, *forced]
        out = self.model.generate(encoded, [prompt], beam_size=self.beam_size, max_length=448, suppress_tokens=[-1])[0]
        ids = [t for t in out.sequences_ids[0] if t < self.tok.eot]
        if ids[: len(forced)] == forced:
            ids = ids[len(forced) :]
        text = self.tok.decode(ids).strip()
        raw = text.encode()
        return None if prefix and raw and len(raw) / len(zlib.compress(raw)) > 2.4 else text


def turns_of(pcm: np.ndarray, contiguous: bool = False) -> list[tuple[int, int]]:
    live = LiveInput(SR, SessionSettings().turn_detection)
    turns: list[tuple[int, int]] = []
    start, last_end, step = None, 0, SR // 10
    for i in range(0, len(pcm), step):
        for event in live.feed(base64.b64encode(pcm[i : i + step].tobytes()).decode()).events:
            if event.kind == "start":
                start = max(event.sample - 10 * SR, last_end)
            elif event.kind == "stop" and start is not None:
                end = min(event.sample, i + step)
                while end - start > 28 * SR:
                    turns.append((start, start + 28 * SR))
                    start += 28 * SR
                turns.append((start, end))
                last_end, start = end, None
    if start is not None:
        turns.append((start, len(pcm)))
    if contiguous:
        return [(turns[k - 1][1] if k else first, end) for k, (first, end) in enumerate(turns)]
    return turns


def read_turns(reader: Reader, pcm: np.ndarray, turns: list[tuple[int, int]], context_s: int, most: int) -> str:
    texts: list[str] = []
    for k, (start, end) in enumerate(turns):
        j = k
        while (
            context_s
            and j > 0
            and k - j < most
            and turns[j - 1][1] == turns[j][0]
            and end - turns[j - 1][0] <= 28 * SR
            and start - turns[j - 1][0] <= context_s * SR
            and texts[j - 1]
        ):
            j -= 1
        text = reader.read(pcm[turns[j][0] : end], " ".join(texts[j:k])) if j < k else None
        texts.append(reader.read(pcm[start:end]) or "" if text is None else text)
    return " ".join(t for t in texts if t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="../shared/data/dev/manifest.jsonl")
    parser.add_argument("--contiguous", action="store_true", help="every turn starts where the previous one ended")
    parser.add_argument("--beam-size", type=int, default=1, help="beam size of every decode (default: 1, greedy)")
    args = parser.parse_args()
    manifest = Path(args.dataset)
    items = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    items = [d for d in items if 60 <= d["duration_s"] <= 200]
    _, normalise = text_normaliser()
    reader = Reader(args.beam_size)
    refs: list[str] = []
    hyps: dict[str, list[str]] = {way: [] for way in WAYS}
    for item in items:
        samples = decode_audio((manifest.parent / item["audio"]).read_bytes(), 3600.0).samples
        pcm = np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16)
        turns = turns_of(pcm, args.contiguous)
        refs.append(normalise(item["text"]))
        line = [f"{Path(item['audio']).name[:36]:36} {len(turns):3} turns"]
        for way, (context_s, most) in WAYS.items():
            began = time.perf_counter()
            hyps[way].append(normalise(read_turns(reader, pcm, turns, context_s, most)))
            o = jiwer.process_words(refs[-1], hyps[way][-1])
            took = time.perf_counter() - began
            line.append(f"{way}: {o.wer:5.1%} {o.substitutions}/{o.deletions}/{o.insertions} {took:3.0f} s")
        print(" | ".join(line), flush=True)
    for way in WAYS:
        o = jiwer.process_words(refs, hyps[way])
        print(f"{way:16} WER {o.wer:.2%} (S/D/I {o.substitutions}/{o.deletions}/{o.insertions})")


if __name__ == "__main__":
    main()
