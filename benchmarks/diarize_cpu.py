"""Diarization's CPU over a plain transcription, for one server or two compared A B B A.

Each visit to a server transcribes every conversation of a set (the bench's: bench/diarize.py) as plain
``json`` and then as ``diarized_json`` (the second visit the other way round), one request at a time, and
reads the server's CPU seconds (the API process and its engine, /metrics) around each pass. The host's speed
drifts between minutes, so two servers (``--base-url`` twice: today's code and another) are visited
A B B A and compared as ratios within the run. ``--seed`` more than once: each seed's set in turn (one
server: one visit a seed, its two passes in alternating order), then all of them together, weighted by
their audio.

    voxlane serve --port 8401 &                 # and another server on 8402
    python benchmarks/diarize_cpu.py --base-url http://127.0.0.1:8401 --base-url http://127.0.0.1:8402 \\
        --dev-dir DEV --set hard --seed 1
    python benchmarks/diarize_cpu.py --base-url http://127.0.0.1:8401 --dev-dir DEV --set hard \\
        --seed 0 --seed 1 --seed 2                  # ... every seed of the hard set
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diarize_rescore import conversations

from voxlane.bench.conversations import Conversation, wav_bytes
from voxlane.bench.diarize import _cpu_s

FIELDS = {"json": {}, "diarized_json": {"response_format": "diarized_json"}}


def one_pass(client: httpx.Client, convs: list[Conversation], fmt: str) -> float:
    """CPU seconds per audio minute of transcribing every conversation as ``fmt``."""
    before = _cpu_s(client)
    for conv in convs:
        response = client.post(
            "/v1/audio/transcriptions",
            files={"file": (f"{conv.name}.wav", wav_bytes(conv.pcm), "audio/wav")},
            data={"model": "whisper-1", **FIELDS[fmt]},
        )
        response.raise_for_status()
    return (_cpu_s(client) - before) / (sum(c.duration_s for c in convs) / 60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", action="append", required=True, help="a server; twice: A B B A")
    parser.add_argument("--dev-dir", type=Path, required=True)
    parser.add_argument("--set", dest="set_name", choices=("default", "hard"), default="default")
    parser.add_argument("--seed", type=int, action="append", help="the set's seed (default 0); more than once: each")
    args = parser.parse_args()
    if len(args.base_url) > 2:
        parser.error("one or two --base-url")
    seeds = args.seed or [0]
    urls = args.base_url
    there, back = ("json", "diarized_json"), ("diarized_json", "json")
    # Per server and format, (CPU s per audio minute, audio minutes) of each pass.
    seen: dict[str, dict[str, list[tuple[float, float]]]] = {u: {f: [] for f in FIELDS} for u in urls}
    for k, seed in enumerate(seeds):
        convs = conversations(args.dev_dir, args.set_name, seed)
        minutes = sum(c.duration_s for c in convs) / 60
        visits = [(urls[0], there), (urls[0], back)]
        if len(seeds) > 1 and len(urls) == 1:
            visits = [(urls[0], there if k % 2 == 0 else back)]
        elif len(urls) == 2:
            visits = [(urls[0], there), (urls[1], there), (urls[1], back), (urls[0], back)]
        for url, order in visits:
            with httpx.Client(base_url=url, timeout=600.0) as client:
                for fmt in order:
                    seen[url][fmt].append((one_pass(client, convs, fmt), minutes))
                    print(
                        f"seed {seed}  {url}  {fmt:14s} {seen[url][fmt][-1][0]:.3f} CPU s per audio minute", flush=True
                    )
        for url in urls:
            plain, diarized = (seen[url][f][-1][0] for f in FIELDS)
            print(f"seed {seed}  {url}  diarized over plain: +{diarized / plain - 1:.1%}", flush=True)
    means = {u: {f: sum(c * m for c, m in v) / sum(m for _, m in v) for f, v in by.items()} for u, by in seen.items()}
    for url, m in means.items():
        print(
            f"{url}: plain {m['json']:.2f}, diarized {m['diarized_json']:.2f} CPU s per audio minute: "
            f"+{m['diarized_json'] / m['json'] - 1:.1%}"
        )
    if len(urls) == 2:
        a, b = (means[u]["diarized_json"] for u in urls)
        print(f"diarized, second / first: {b / a:.3f}")


if __name__ == "__main__":
    main()
