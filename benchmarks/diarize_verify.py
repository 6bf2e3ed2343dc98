"""The speaker count checked by a second encoder on a cluster's speech joined: an offline trial on captured
transcriptions (benchmarks/diarize_rescore.py ``capture``), not what the server does.

GE2E embeds each 0.2-3 s region; two alike voices, one of them with 3-8 s of speech, meet at cosine
0.71-0.78 there, as a stray part of one voice meets its own, so the count step cannot tell them apart
(docs/diarization.md, "The hard set"). CAM++ separates whole sentences far better than regions. Here the
count step's candidate (the clustering cut at one speaker more, its new cluster N and the cluster X most like
it) is decided on the audio instead: N's regions most like its centroid joined into one stretch of up to
``--max-s`` (at least ``--min-s``, else the step stops), CAM++ on it and on up to ``--chunks`` stretches of
X's regions joined, of N's length; N is a speaker when the mean cosine is under ``--different``. Then, with
``--same``, each cluster of ``--min-s`` to ``--same-under-s`` of speech is checked against its nearest the
same way, smallest first, and merged into it at ``--same`` or over. Everything else is the server's code
(voxlane/speakers/diarize.py). Prints, per captured set, the defaults' and the trial's mean DER, worst, count
right, a paired 95% bootstrap interval, and the CAM++ audio seconds and CPU.

    python -m voxlane.speakers.weights --model campplus        # CAM++'s weights, once
    python benchmarks/diarize_verify.py hard1.pkl hard0.pkl hard2.pkl default0.pkl --dev-dir DEV
"""

from __future__ import annotations

import argparse
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from diarize_rescore import bootstrap, conversations

from voxlane.bench.diarize import der
from voxlane.runners.speaker import load_encoder
from voxlane.speakers import diarize as D
from voxlane.speakers.features import speaker_features
from voxlane.speakers.weights import weights_path

SAMPLE_RATE = 16000


@dataclass
class Trial:
    min_s: float = 2.5
    max_s: float = 4.0
    different: float = 0.5
    chunks: int = 1
    same: float | None = 0.7
    same_under_s: float = 8.0


class Verifier:
    """CAM++ on the joined audio of regions of one conversation, with the audio seconds and CPU it took."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial
        self.encoder = load_encoder(weights_path("campplus"))
        self.audio_s = 0.0
        self.cpu_s = 0.0
        self.pcm = np.zeros(0, dtype=np.int16)
        self.regions: list[D.Region] = []
        self.embeddings = np.zeros((0, 0))
        self.memo: dict[bytes, np.ndarray] = {}

    def start(self, pcm: np.ndarray, regions: list[D.Region], embeddings: np.ndarray) -> None:
        self.pcm, self.regions, self.embeddings, self.memo = pcm, regions, embeddings, {}

    def joined(self, idx: np.ndarray) -> np.ndarray:
        spans = [(int(self.regions[i].start * SAMPLE_RATE), int(self.regions[i].end * SAMPLE_RATE)) for i in idx]
        parts = [self.pcm[a:b] for a, b in spans]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)

    def speech_s(self, idx: np.ndarray) -> float:
        return float(sum(self.regions[i].end - self.regions[i].start for i in idx))

    def typical(self, idx: np.ndarray) -> np.ndarray:
        """The regions of ``idx`` most like their centroid, in time order, up to max_s of speech."""
        centroid = D._normalise(self.embeddings[idx].sum(axis=0))
        kept, total = [], 0.0
        for i in idx[np.argsort(-(self.embeddings[idx] @ centroid))]:
            if total >= self.trial.max_s:
                break
            kept.append(i)
            total += self.regions[i].end - self.regions[i].start
        return np.sort(np.array(kept, dtype=np.int64))

    def embed(self, pcm: np.ndarray) -> np.ndarray:
        key = pcm.tobytes()
        if key in self.memo:
            return self.memo[key]
        t = time.process_time()
        fbank = speaker_features(pcm)[:, self.encoder.feature_columns]
        e = self.encoder.embed_one(fbank - fbank.mean(axis=0))
        self.cpu_s += time.process_time() - t
        self.audio_s += len(pcm) / SAMPLE_RATE
        self.memo[key] = e / max(float(np.linalg.norm(e)), 1e-12)
        return self.memo[key]

    def similarity(self, labels: np.ndarray, n: int, x: int) -> float | None:
        """Mean cosine of cluster n's joined speech (its typical regions, up to max_s) with stretches of
        cluster x's of its length; None when n has under min_s of speech."""
        a = self.joined(self.typical(np.flatnonzero(labels == n)))
        if len(a) < self.trial.min_s * SAMPLE_RATE:
            return None
        b = self.joined(np.flatnonzero(labels == x))
        size = len(a)
        chunks = [b[i : i + size] for i in range(0, max(1, len(b) - size // 2), size)][: self.trial.chunks] or [b]
        e = self.embed(a)
        return float(np.mean([e @ self.embed(c) for c in chunks]))


def cluster(v: Verifier, embeddings: np.ndarray, threshold: float, merge: float, weights: np.ndarray) -> np.ndarray:
    """Centroids: the server's clustering without its count step, then the count step decided by ``v``, then
    the clusters ``v`` finds to be one voice merged."""
    labels, centroids = D._cluster(embeddings, threshold, merge, D.MIN_POINTS, weights, D.SpeakerCount())
    while (cut := D.one_more_cut(embeddings, threshold, merge, D.MIN_POINTS, weights, centroids)) is not None:
        more_labels, more, new = cut
        sims = more @ more[new]
        sims[new] = -np.inf
        s = v.similarity(more_labels, new, int(np.argmax(sims)))
        if s is None or s >= v.trial.different:
            break
        labels, centroids = more_labels, more
    merged = v.trial.same is not None
    while merged and len(centroids) > 1:
        merged = False
        mass = np.bincount(labels, weights, minlength=len(centroids))
        for c in np.argsort(mass):
            if v.speech_s(np.flatnonzero(labels == c)) >= v.trial.same_under_s:
                continue
            sims = centroids @ centroids[c]
            sims[c] = -np.inf
            x = int(np.argmax(sims))
            s = v.similarity(labels, int(c), x)
            if s is not None and s >= v.trial.same:  # type: ignore[operator]
                labels = np.unique(np.where(labels == c, x, labels), return_inverse=True)[1]
                centroids = D._centroids(embeddings, labels)
                merged = True
                break
    return centroids


def diarize(v: Verifier, inputs: list) -> list[D.SpeakerSegment]:
    words, regions, embeddings, weights, references, threshold, merge, known, min_turn_s = inputs[:9]
    count = inputs[9] if len(inputs) > 9 else D.SpeakerCount()
    if count != D.SpeakerCount():  # a request's hints: the server's path
        return D.diarize(*inputs)
    centroids = cluster(v, embeddings, threshold, merge, weights)
    return D.segments_of(words, regions, embeddings, centroids, references, known, min_turn_s)


def score(path: Path, dev_dir: Path, trial: Trial, verbose: bool) -> None:
    captured = pickle.loads(path.read_bytes())
    convs = {c.name: c for c in conversations(dev_dir, captured["set"], captured["seed"])}
    v = Verifier(trial)
    rows = []
    for row in captured["rows"]:
        conv = convs[row["name"]]
        inputs = list(pickle.loads(row["inputs"]))
        v.start(conv.pcm, inputs[1], inputs[2])
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
    for i, label in ((2, "defaults"), (3, "checked by CAM++")):
        d = np.array([r[i][0] for r in rows])
        right = sum(r[i][1] == r[1] for r in rows)
        print(
            f"{name:16s} {label:17s} mean DER {d.mean():.2%}  worst {d.max():.1%}  over 15% {int((d > 0.15).sum())}  "
            f"count right {right}/{len(rows)}"
        )
    diff = np.array([r[3][0] - r[2][0] for r in rows])
    lo, hi = bootstrap(diff)
    print(
        f"{name:16s} difference {diff.mean():+.2%} (95% bootstrap interval [{lo:+.2%}, {hi:+.2%}]), better on "
        f"{int((diff < -1e-4).sum())}, worse on {int((diff > 1e-4).sum())}; CAM++ on {v.audio_s:.0f} s of "
        f"{minutes * 60:.0f} s of audio, {v.cpu_s / minutes:.2f} CPU s per audio minute"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captured", type=Path, nargs="+")
    parser.add_argument("--dev-dir", type=Path, required=True)
    parser.add_argument("--min-s", type=float, default=Trial.min_s)
    parser.add_argument("--different", type=float, default=Trial.different)
    parser.add_argument("--max-s", type=float, default=Trial.max_s)
    parser.add_argument("--chunks", type=int, default=Trial.chunks)
    parser.add_argument("--same-under-s", type=float, default=Trial.same_under_s)
    parser.add_argument("--same", type=float, default=Trial.same, help="0 or less: no merge check")
    parser.add_argument("--verbose", action="store_true", help="each conversation's DER (count found)")
    args = parser.parse_args()
    same = args.same if args.same and args.same > 0 else None
    trial = Trial(args.min_s, args.max_s, args.different, args.chunks, same, args.same_under_s)
    for path in args.captured:
        score(path, args.dev_dir, trial, args.verbose)


if __name__ == "__main__":
    main()
