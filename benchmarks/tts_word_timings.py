"""Speech word timings against Whisper's word alignment of the same audio.

Each paragraph of voxlane/bench/paragraphs.py (50 to 95 words) is spoken by POST /v1/audio/speech with
``stream_format=sse`` and ``timestamps=["word"]`` (wav), the audio transcribed by the same server's
POST /v1/audio/transcriptions (``verbose_json``, ``timestamp_granularities[]=word``), the two word lists matched
on lower-case letters and digits (difflib: equal runs only), and the |start difference| of every matched word
summarised: median, p90, and how many matched. It also prints how many of the input's words had their time
spread over a group or cut from a joined IPA word (text/timings.py's fallbacks), from the same text work the
server does, and the cost of fetching the alignment output: the voice run with and without it, alternated.

    .venv/bin/python benchmarks/tts_word_timings.py [--repeats 1] [--voice joe] [--cost-runs 20]
"""

from __future__ import annotations

import argparse
import base64
import difflib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voxlane.bench.paragraphs import PARAGRAPHS
from voxlane.bench.server import running_server
from voxlane.text.timings import key


def speak(client: httpx.Client, text: str, voice: str) -> tuple[bytes, list[dict[str, Any]]]:
    """The paragraph's wav and its words, from the SSE stream."""
    body = {
        "model": "tts-1",
        "voice": voice,
        "input": text,
        "response_format": "wav",
        "stream_format": "sse",
        "timestamps": ["word"],
    }
    audio = b""
    words: list[dict[str, Any]] = []
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "speech.audio.delta":
                audio += base64.b64decode(event["audio"])
            elif event["type"] == "speech.audio.done":
                words = event["words"]
    return audio, words


def heard(client: httpx.Client, audio: bytes) -> list[dict[str, Any]]:
    response = client.post(
        "/v1/audio/transcriptions",
        data={"model": "whisper-1", "response_format": "verbose_json", "timestamp_granularities[]": "word"},
        files={"file": ("speech.wav", audio, "audio/wav")},
    )
    response.raise_for_status()
    return list(response.json()["words"])


def start_differences(said: list[dict[str, Any]], transcribed: list[dict[str, Any]]) -> list[float]:
    """|start difference| of each word in the runs where both lists have the same words."""
    a = [key(w["word"]) for w in said]
    b = [key(w["word"]) for w in transcribed]
    out: list[float] = []
    for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            out.append(abs(said[block.a + k]["start"] - transcribed[block.b + k]["start"]))
    return out


def fallbacks(voice_config: str) -> tuple[int, int, int]:
    """(words, words spread over a group, spoken tokens cut from a joined IPA word) over all paragraphs."""
    from voxlane.text.phonemes import prepare_timed, unit_ids_marked

    words = spread = cut = 0
    for text in PARAGRAPHS:
        voice, units, _, _, plan = prepare_timed(text, voice_config)
        words += len(plan)
        spread += sum(1 for w in plan if w.spread)
        cut += sum(unit_ids_marked(u, voice)[1].interpolated for u in units)
    return words, spread, cut


def alignment_cost(model_path: str, config_path: str, runs: int) -> tuple[float, float]:
    """Mean seconds of one unit's run without and with the alignment output (same session options, one
    thread, alternated so that drift hits both)."""
    import numpy as np
    import onnxruntime

    from voxlane.runners.piper import _with_alignment, session_options
    from voxlane.text.phonemes import phoneme_ids
    from voxlane.voice_config import load_voice_config

    voice = load_voice_config(config_path)
    ids = np.array([phoneme_ids(PARAGRAPHS[0].split(". ")[0], voice)], dtype=np.int64)
    args = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([voice.noise_scale, voice.length_scale, voice.noise_w_scale], dtype=np.float32),
    }
    plain = onnxruntime.InferenceSession(model_path, session_options(1), providers=["CPUExecutionProvider"])
    aligned = onnxruntime.InferenceSession(
        _with_alignment(model_path)[0], session_options(1), providers=["CPUExecutionProvider"]
    )
    times: dict[str, list[float]] = {"plain": [], "aligned": []}
    for _ in range(runs):
        for name, session in (("plain", plain), ("aligned", aligned), ("aligned", aligned), ("plain", plain)):
            start = time.perf_counter()
            session.run(None, args)
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["plain"]), statistics.median(times["aligned"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voice", default="joe")
    parser.add_argument("--repeats", type=int, default=1, help="times each paragraph is spoken")
    parser.add_argument("--cost-runs", type=int, default=20, help="runs of each session for the cost figure")
    args = parser.parse_args()

    differences: list[float] = []
    said_words = 0
    with running_server() as srv, httpx.Client(base_url=srv.base_url, timeout=300) as client:
        for _ in range(args.repeats):
            for text in PARAGRAPHS:
                audio, words = speak(client, text, args.voice)
                said_words += len(words)
                differences += start_differences(words, heard(client, audio))
    differences.sort()
    p90 = differences[min(len(differences) - 1, int(0.9 * len(differences)))]
    print(f"paragraphs: {len(PARAGRAPHS)} x {args.repeats}, words with timings: {said_words}")
    print(f"matched with Whisper's words: {len(differences)} ({len(differences) / max(said_words, 1):.0%})")
    print(f"|start difference|: median {statistics.median(differences):.3f} s, p90 {p90:.3f} s")

    from voxlane.config.resolve import default_voice_paths

    model_path, config_path = default_voice_paths()
    words, spread, cut = fallbacks(config_path)
    print(f"fallbacks: {spread} of {words} words spread over a group ({spread / words:.1%}); {cut} spoken tokens")
    print(f"  cut from a joined IPA word ({cut / words:.1%} of the words)")
    plain_s, aligned_s = alignment_cost(model_path, config_path, args.cost_runs)
    print(f"one unit's run, median of {2 * args.cost_runs}: without the alignment output {plain_s * 1000:.1f} ms,")
    print(f"  with it {aligned_s * 1000:.1f} ms ({aligned_s / plain_s - 1:+.1%})")


if __name__ == "__main__":
    main()
