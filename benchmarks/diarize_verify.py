"""The speaker count check re-scored offline, with its settings changed: captured transcriptions
(benchmarks/diarize_rescore.py ``capture``, whose inputs are the clustering's) clustered twice, by the count
step's rule on GE2E's centroids (the server with ``--speaker-check-model none``) and by the count check (the
server's default: voxlane/speakers/diarize.py ``merge_candidates``, ``count_candidate`` then
``split_candidates`` with ``sounds_apart``, each stretch embedded whole by CAM++ here instead of in the
engine, each heard once).
``--min-s``, ``--max-s``, ``--different``, ``--same``, ``--nearest``, ``--merge-under``,
``--split-similarity``, ``--two-means-similarity`` and ``--regions-different`` replace CHECK_MIN_S,
CHECK_MAX_S, CHECK_DIFFERENT, CHECK_SAME, CHECK_NEAREST, MERGE_UNDER_S, SPLIT_SIMILARITY,
TWO_MEANS_SIMILARITY and SPLIT_REGIONS_DIFFERENT. Prints, per captured set, both ways' mean DER, worst, count right, a
paired 95% bootstrap interval, and the CAM++ audio seconds and CPU.

    python benchmarks/diarize_verify.py hard1.pkl hard0.pkl hard2.pkl default0.pkl --dev-dir DEV
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
from diarize_rescore import bootstrap, conversations

from voxlane.bench.diarize import der
from voxlane.runners.speaker import load_encoder
from voxlane.speakers import diarize as D
from voxlane.speakers.features import SAMPLE_RATE, stretch_features
from voxlane.speakers.weights import weights_path


class Verifier:
    """CAM++ on the count check's stretches of one conversation, each heard once, with the audio seconds and
    CPU it took."""

    def __init__(self) -> None:
        self.encoder = load_encoder(weights_path("campplus"))
        self.audio_s = 0.0
        self.cpu_s = 0.0
        self.pcm = np.zeros(0, dtype=np.int16)
        self.heard: dict[tuple[D.Region, ...], np.ndarray] = {}

    def hear(self, stretches: list[list[D.Region]]) -> dict[tuple[D.Region, ...], np.ndarray]:
        todo = list(dict.fromkeys(tuple(s) for s in stretches if tuple(s) not in self.heard))
        if todo:
            pieces = [[self.pcm[round(r.start * SAMPLE_RATE) : round(r.end * SAMPLE_RATE)] for r in s] for s in todo]
            features, spans = stretch_features(pieces)
            t = time.process_time()
            vectors, _ = self.encoder.embed_windows([(features, spans)])[0]
            self.cpu_s += time.process_time() - t
            self.audio_s += len(features) / 100
            self.heard.update(zip(todo, vectors))
        return self.heard

    def cosine(self, a: list[D.Region], b: list[D.Region]) -> float:
        heard = self.hear([a, b])
        return float(heard[tuple(a)] @ heard[tuple(b)])

    def two_voices(self, a: list[D.Region], b: list[D.Region]) -> bool:
        return self.cosine(a, b) < D.CHECK_DIFFERENT


def diarize(v: Verifier, inputs: list) -> list[D.SpeakerSegment]:
    """The server's speaker_segments (server/diarized.py) with ``v`` for the engine."""
    words, regions, embeddings, weights, references, threshold, merge, known, min_turn_s = inputs[:9]
    count = inputs[9] if len(inputs) > 9 else D.SpeakerCount()
    v.heard = {}
    _, centroids = D.first_clusters(embeddings, threshold, merge, weights, count)
    while len(centroids) > max(1, count.low):
        into = next(
            (
                (m.speaker, j)
                for m in D.merge_candidates(embeddings, regions, centroids, weights)
                for j, n in m.nearest
                if v.cosine(m.stretch, n) >= D.CHECK_SAME
            ),
            None,
        )
        if into is None:
            break
        centroids = D.merge_speakers(embeddings, centroids, *into)
    while count.high is None or len(centroids) < count.high:
        candidate = D.count_candidate(embeddings, regions, threshold, merge, weights, centroids)
        if candidate is None or not all(v.two_voices(candidate.stretch, n) for n in candidate.nearest):
            break
        centroids = candidate.centroids
    if count.high is None or len(centroids) < count.high:
        splits = D.split_candidates(embeddings, regions, threshold, merge, weights, centroids)
        two = []
        for c in splits:
            cos = v.cosine(*c.stretches)
            if D.unsure(cos):
                heard = v.hear([[regions[i]] for i in c.members] + list(c.stretches))
                members = [heard[(regions[i],)] for i in c.members]
                ends = (heard[tuple(c.stretches[0])], heard[tuple(c.stretches[1])])
                if D.sounds_apart(c, members, ends, regions) < D.SPLIT_REGIONS_DIFFERENT:
                    two.append(c)
            elif cos < D.CHECK_DIFFERENT:
                two.append(c)
        room = len(regions) if count.high is None else count.high - len(centroids)
        centroids = D.split(centroids, two[:room])
    return D.segments_of(words, regions, embeddings, centroids, references, known, min_turn_s)


def score(path: Path, dev_dir: Path, v: Verifier, verbose: bool) -> None:
    captured = pickle.loads(path.read_bytes())
    convs = {c.name: c for c in conversations(dev_dir, captured["set"], captured["seed"])}
    v.audio_s = v.cpu_s = 0.0
    rows = []
    for row in captured["rows"]:
        conv = convs[row["name"]]
        inputs = list(pickle.loads(row["inputs"]))
        v.pcm = conv.pcm
        out = []
        for parts in (D.diarize(*inputs), diarize(v, inputs)):
            segments = [{"start": p.start, "end": p.end, "speaker": p.speaker} for p in parts]
            out.append((der(conv, segments)["der"], len({s["speaker"] for s in segments})))
        rows.append((conv.name, len(conv.speakers), *out))
        if verbose:
            (a, na), (b, nb) = out
            print(f"{conv.name:22s} {len(conv.speakers)}  {a:6.1%} ({na})  {b:6.1%} ({nb})")
    minutes = sum(c.duration_s for c in convs.values()) / 60
    name = f"{captured['set']} seed {captured['seed']}"
    for i, label in ((2, "GE2E's rule"), (3, "count check")):
        d = np.array([r[i][0] for r in rows])
        right = sum(r[i][1] == r[1] for r in rows)
        print(
            f"{name:16s} {label:12s} mean DER {d.mean():.2%}  worst {d.max():.1%}  over 15% {int((d > 0.15).sum())}  "
            f"count right {right}/{len(rows)}"
        )
    diff = np.array([r[3][0] - r[2][0] for r in rows])
    lo, hi = bootstrap(diff)
    print(
        f"{name:16s} difference {diff.mean():+.2%} (95% bootstrap interval [{lo:+.2%}, {hi:+.2%}]), better on "
        f"{int((diff < -1e-3).sum())}, worse on {int((diff > 1e-3).sum())}; CAM++ on {v.audio_s:.0f} s of "
        f"{minutes * 60:.0f} s of audio, {v.cpu_s / minutes:.2f} CPU s per audio minute"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captured", type=Path, nargs="+")
    parser.add_argument("--dev-dir", type=Path, required=True)
    parser.add_argument("--min-s", type=float, default=D.CHECK_MIN_S)
    parser.add_argument("--max-s", type=float, default=D.CHECK_MAX_S)
    parser.add_argument("--different", type=float, default=D.CHECK_DIFFERENT)
    parser.add_argument("--same", type=float, default=D.CHECK_SAME)
    parser.add_argument("--nearest", type=int, default=D.CHECK_NEAREST)
    parser.add_argument("--merge-under", type=float, default=D.MERGE_UNDER_S, help="0: no merge step")
    parser.add_argument("--split-similarity", type=float, default=D.SPLIT_SIMILARITY)
    parser.add_argument("--two-means-similarity", type=float, default=D.TWO_MEANS_SIMILARITY)
    parser.add_argument("--regions-different", type=float, default=D.SPLIT_REGIONS_DIFFERENT, help="0: never")
    parser.add_argument("--verbose", action="store_true", help="each conversation's DER (count found)")
    args = parser.parse_args()
    D.CHECK_MIN_S, D.CHECK_MAX_S, D.CHECK_DIFFERENT = args.min_s, args.max_s, args.different
    D.SPLIT_SIMILARITY = args.split_similarity
    D.TWO_MEANS_SIMILARITY, D.SPLIT_REGIONS_DIFFERENT = args.two_means_similarity, args.regions_different
    D.CHECK_SAME, D.CHECK_NEAREST, D.MERGE_UNDER_S = args.same, args.nearest, args.merge_under
    v = Verifier()
    for path in args.captured:
        score(path, args.dev_dir, v, args.verbose)


if __name__ == "__main__":
    main()
