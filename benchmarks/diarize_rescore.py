"""Re-score diarization offline: one transcription per conversation, then every change to the speaker side
(voxlane/speakers/diarize.py) scored in seconds, without Whisper or a server.

- ``serve --dump DIR -- ARGS``: ``voxlane serve ARGS`` in this process, each diarized request's inputs to
  ``diarize`` (Whisper's words, the speech regions, their embeddings and weights, the thresholds) pickled to
  ``DIR`` in order.
- ``capture``: against that server, one ``diarized_json`` request per conversation of a set (the bench's:
  bench/diarize.py, ``--set hard`` or the default set), one at a time; each request's pickled inputs and the
  server's segments are saved together in one file.
- ``score``: ``diarize`` with today's code on the captured inputs, DER per conversation (bench/diarize.py
  ``der``, 0.25 s collar), the means and the counts; ``--save`` keeps the rows, ``--thresholds`` replaces
  the server's clustering thresholds.
- ``compare A B``: per conversation, B's DER minus A's, and a 95% bootstrap interval of its mean.

    python benchmarks/diarize_rescore.py serve --dump /tmp/dump -- --port 8401 &
    python benchmarks/diarize_rescore.py capture --base-url http://127.0.0.1:8401 --dump /tmp/dump \\
        --dev-dir DEV --set hard --seed 1 --out hard1.pkl
    python benchmarks/diarize_rescore.py score hard1.pkl --dev-dir DEV --save before.json
    python benchmarks/diarize_rescore.py compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from voxlane.bench.conversations import Conversation, build, load_pieces, wav_bytes
from voxlane.bench.diarize import der
from voxlane.bench.hard_conversations import build_hard


def serve(dump: Path, argv: list[str]) -> int:
    import voxlane.server.diarized as route
    from voxlane.cli import main
    from voxlane.speakers.diarize import MIN_TURN_S

    dump.mkdir(parents=True, exist_ok=True)
    inner = route.speaker_segments
    calls = [len(list(dump.glob("*.pkl")))]

    async def recording(state: Any, diarization: Any, segments: Any) -> Any:
        out = await inner(state, diarization, segments)
        c = state.config
        args = (
            *route._inputs(diarization, segments),
            c.diarize_threshold,
            c.diarize_merge_threshold,
            c.diarize_known_threshold,
            MIN_TURN_S,
            diarization.count,
        )  # diarize's arguments: without the count check, whether or not the server ran it
        (dump / f"{calls[0]:05d}.pkl").write_bytes(pickle.dumps(args))
        calls[0] += 1
        return out

    route.speaker_segments = recording  # type: ignore[assignment]
    return main(["serve", *argv])


def conversations(dev_dir: Path, set_name: str, seed: int) -> list[Conversation]:
    """The bench's conversations (bench/diarize.py ``run``), without their reference texts."""
    speakers = load_pieces(dev_dir)
    if set_name == "hard":
        return build_hard(speakers, seed)
    return build(speakers, 15, seed, known=True) + build(speakers, 5, seed + 1, overlap_every=3)


def capture(base_url: str, dump: Path, dev_dir: Path, set_name: str, seed: int, out: Path) -> None:
    client = httpx.Client(base_url=base_url, timeout=600.0)
    rows: list[dict[str, Any]] = []
    captured = {"set": set_name, "seed": seed, "rows": rows}
    for conv in conversations(dev_dir, set_name, seed):
        before = set(dump.glob("*.pkl"))
        response = client.post(
            "/v1/audio/transcriptions",
            files={"file": (f"{conv.name}.wav", wav_bytes(conv.pcm), "audio/wav")},
            data={"model": "gpt-4o-transcribe-diarize", "response_format": "diarized_json"},
        )
        response.raise_for_status()
        new = sorted(set(dump.glob("*.pkl")) - before)
        if len(new) != 1:
            raise RuntimeError(f"{len(new)} new dumps for {conv.name}: is another client using this server?")
        segments = response.json()["segments"]
        rows.append({"name": conv.name, "inputs": new[0].read_bytes(), "segments": segments})
        print(f"{conv.name:24s} DER {der(conv, segments)['der']:.1%}", flush=True)
    out.write_bytes(pickle.dumps(captured))


def score(path: Path, dev_dir: Path, save: Path | None, thresholds: list[float] | None = None) -> None:
    from voxlane.speakers.diarize import diarize

    captured = pickle.loads(path.read_bytes())
    convs = {c.name: c for c in conversations(dev_dir, captured["set"], captured["seed"])}
    rows = []
    for row in captured["rows"]:
        conv = convs[row["name"]]
        inputs = list(pickle.loads(row["inputs"]))
        if thresholds:  # diarize's threshold, merge_threshold (and known_threshold) arguments
            inputs[5 : 5 + len(thresholds)] = thresholds
        parts = diarize(*inputs)
        segments = [{"start": p.start, "end": p.end, "speaker": p.speaker} for p in parts]
        result = der(conv, segments)
        served = der(conv, row["segments"])["der"]
        found = len({s["speaker"] for s in segments})
        rows.append({"name": conv.name, "speakers": len(conv.speakers), "found": found, "served_der": served, **result})
        print(
            f"{conv.name:24s} {len(conv.speakers)} found {found}  DER {result['der']:6.1%} (miss "
            f"{result['missed']:.1%} FA {result['false_alarm']:.1%} conf {result['confusion']:.1%})  "
            f"served {served:6.1%}"
        )
    ders = np.array([r["der"] for r in rows])
    print(
        f"mean DER {ders.mean():.1%} (missed {np.mean([r['missed'] for r in rows]):.1%}, false alarm "
        f"{np.mean([r['false_alarm'] for r in rows]):.1%}, confusion {np.mean([r['confusion'] for r in rows]):.1%}); "
        f"worst {ders.max():.1%}; over 15% {int((ders > 0.15).sum())}/{len(rows)}; count right "
        f"{sum(r['found'] == r['speakers'] for r in rows)}/{len(rows)}; served mean "
        f"{np.mean([r['served_der'] for r in rows]):.1%}"
    )
    if save is not None:
        save.write_text(json.dumps({"rows": rows}, indent=1))


def bootstrap(diff: np.ndarray, draws: int = 10_000, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), (draws, len(diff)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def compare(first: Path, second: Path) -> None:
    a = {r["name"]: r for r in json.loads(first.read_text())["rows"]}
    b = {r["name"]: r for r in json.loads(second.read_text())["rows"]}
    names = [n for n in a if n in b]
    diff = np.array([b[n]["der"] - a[n]["der"] for n in names])
    for n, d in zip(names, diff):
        print(f"{n:24s} {a[n]['der']:6.1%} ({a[n]['found']}) -> {b[n]['der']:6.1%} ({b[n]['found']})  {d:+.1%}")
    lo, hi = bootstrap(diff)
    print(
        f"mean DER {np.mean([a[n]['der'] for n in names]):.1%} -> {np.mean([b[n]['der'] for n in names]):.1%}: "
        f"{diff.mean():+.2%} (95% bootstrap interval [{lo:+.2%}, {hi:+.2%}]); better on {int((diff < -1e-4).sum())}, "
        f"worse on {int((diff > 1e-4).sum())} of {len(names)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--dump", type=Path, required=True)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p = sub.add_parser("capture")
    p.add_argument("--base-url", required=True)
    p.add_argument("--dump", type=Path, required=True)
    p.add_argument("--dev-dir", type=Path, required=True)
    p.add_argument("--set", dest="set_name", choices=["default", "hard"], default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("score")
    p.add_argument("captured", type=Path)
    p.add_argument("--dev-dir", type=Path, required=True)
    p.add_argument("--save", type=Path)
    p.add_argument("--thresholds", type=float, nargs="+", help="instead of the server's: THRESHOLD MERGE_THRESHOLD")
    p = sub.add_parser("compare")
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    args = parser.parse_args()
    if args.command == "serve":
        sys.exit(serve(args.dump, [a for a in args.args if a != "--"]))
    if args.command == "capture":
        capture(args.base_url, args.dump, args.dev_dir, args.set_name, args.seed, args.out)
    elif args.command == "score":
        score(args.captured, args.dev_dir, args.save, args.thresholds)
    else:
        compare(args.first, args.second)


if __name__ == "__main__":
    main()
