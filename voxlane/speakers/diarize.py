"""Who spoke when, from speaker embeddings and word timestamps: pure functions, no I/O, no model.

The speech of each window is cut into regions at its pauses (voxlane/speakers/features.py
``speech_regions``, at most 3 s each); the engine embeds each region as the mean of the 1.6 s partials that
cover it (:func:`partial_starts`). Then, here:

- :func:`cluster`: agglomerative clustering of the regions, weighted by their partials, in two stages:
  average linkage on cosine similarity down to ``threshold`` (pure clusters, a speaker often in several),
  then centroid linkage down to ``merge_threshold`` (a centroid of many partials is a far steadier voice
  print than one region). Clusters of fewer than ``min_points`` partials are folded into the nearest other
  one (a cough, a laugh), then each region goes to its nearest centroid. Then the clustering is asked for one
  speaker more (cut by count: :func:`_one_more`), and that cut is kept while its new speaker is distinct: at
  least ``MIN_DISTINCT_POINTS`` partials, unlike every other (a speaker who says little, or whose regions were
  each too short to stay a cluster of their own). The speaker count comes out of it, unless the request
  bounds it (:class:`SpeakerCount`): then both stages stop at the lower bound, once the small clusters are
  folded the most alike centroids are merged past the threshold down to the upper one, and no speaker is
  added past it.
  Bounded work and memory: more than ``MAX_POINTS`` regions (a long file) are first averaged in runs of
  neighbours, and every region is then assigned to the centroids.
- :func:`label_words`: each word takes the speaker whose centroid is most like the regions that overlap it,
  weighted by the overlap; the regions end at pauses, so a change of speaker lands between the two words of
  the pause. Runs shorter than ``min_turn_s`` between two runs of one other speaker are given to it, unless
  their regions hold no word of the runs beside them (a reply between pauses: its own embedding decides).
- :func:`name_speakers`: letters A, B, C... in order of first appearance; a cluster whose centroid matches
  a known speaker's reference (greedy, best pairs first, at least ``known_threshold``) takes that name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PARTIAL_FRAMES = 160
"""1.6 s of 10 ms frames: the partial utterances the encoder was trained on."""
MAX_POINTS = 600
"""Regions clustered at once: the similarity matrix is at most 600 x 600 floats (1.4 MB)."""


MIN_POINTS = 6
"""A cluster of fewer partials (about 5 s of speech) is folded into the nearest other one; a distinct voice
comes back when the clustering is asked for one speaker more (:data:`MIN_DISTINCT_POINTS`)."""
MIN_DISTINCT_POINTS = 4
"""The clustering cut at one speaker more is kept when its new speaker has at least this many partials (about
3 s) and a centroid's cosine with every other under DISTINCT_SIMILARITY: in a conversation of 5 or 6,
someone who says little is still a speaker; a cough or a laugh is shorter."""
DISTINCT_SIMILARITY = 0.72
"""Under the centroid merge's 0.8: a new speaker more alike another than this is more likely a stray part of
it. A compromise: on the hard set (seed 1) the candidates of 2.5 s of speech or more meet their nearest
cluster at 0.60-0.77 when they are a speaker, 0.63-0.81 when they are a stray part of one (docs/diarization.md)."""
CHECK_MIN_S = 2.5
"""With the count check (:func:`count_candidate`): a candidate speaker with less speech than this ends the
count step, too little to embed as an utterance."""
CHECK_MAX_S = 4.0
"""The count check joins a speaker's regions most like its centroid up to this much speech: long enough for
a sentence's voice print, short enough to be one voice's."""
CHECK_DIFFERENT = 0.5
"""The candidate is a speaker when its joined speech's cosine with each nearest speaker's is under this. On
the hard set (seed 1), CAM++ put 14 of the 15 true new speakers at 0.06-0.40 and 11 of the 12 stray parts of
one voice at 0.59-0.83 (docs/diarization.md)."""
CHECK_NEAREST = 3
"""The count check hears a candidate against this many of its nearest speakers (by their centroids), each
one's most typical speech: the voice a stray part belongs to is not always the nearest centroid's."""
MERGE_UNDER_S = 8.0
"""Before the count step, a speaker of the clustering with less speech than this is heard against its
CHECK_NEAREST nearest speakers and merged into the first that sounds the same: a stray part of one voice
that the clustering kept as a speaker of its own."""
CHECK_SAME = 0.55
"""The merge step's verdict: joined speech of two speakers at this cosine or over is one voice. CAM++ on 4 s
of one of the hard set's voices against 4 s of another: 0.54 at most; against 4 s more of the same voice:
0.56 at least (benchmarks/diarize_check_lengths.py, docs/diarization.md)."""
TWO_MEANS_SIMILARITY = 0.84
"""Where the clustering's cut at two gives no halves to hear (it splits one voice's stray part off the rest,
or its halves meet at SPLIT_SIMILARITY or over), the speaker is cut by two-means (:func:`_two_means`), and
heard where those halves meet under this: two alike voices clustered as one are often apart region by region
(each of seed 5's hard03 regions nearer its own voice's centroid, 30 of 30) while the clustering's cut
follows a stray part. One voice's two-means halves meet at 0.86 (median; 5th to 95th percentile 0.75-0.92)
on the clusterings of seeds 0-3; two voices' at up to 0.835 on the hard set (docs/diarization.md)."""
SPLIT_SIMILARITY = 0.75
"""Once the count step ends, each speaker is cut in two by the clustering; where the halves' centroids meet
under this, the count check hears the halves (:func:`split_candidates`). Two alike voices clustered as one
split at 0.63-0.73 on the hard and default sets; one voice's halves meet at 0.68-0.95 (median 0.81), so
about one speaker in ten is heard (docs/diarization.md)."""
SPLIT_REGIONS_DIFFERENT = 0.6
"""A split whose stretches meet between CHECK_DIFFERENT and CHECK_SAME (CAM++ cannot tell on 4 s each) is
decided by all its speaker's regions, each heard alone and put with the nearer stretch
(:func:`sounds_apart`): two voices where those two groups' mean vectors meet under this. On the hard set's
seven seeds, the splits of two voices in that band met at 0.49-0.56 and those of one voice at 0.65."""
MERGE_UNLIKE = 0.65
"""The merge step does not hear a speaker against a nearer one whose stretch meets its own under this by
GE2E (:func:`likeness`): CAM++ would not hear one voice there. On seeds 0-6 of the hard set it put all 48 such
pairs at 0.35 or under, CHECK_SAME 0.55 (docs/diarization.md)."""
SPLIT_ALIKE = 0.8
"""A split whose two stretches meet at this or over by GE2E (:func:`likeness`) is one voice, not heard: on
seeds 0-6 of the hard set CAM++ put all 43 such at 0.61 or over, CHECK_SAME 0.55 (docs/diarization.md)."""
SPLIT_REGIONS_MAX_S = 60.0
"""The regions of a split's speaker heard alone are about this much speech at most, every k-th of them, so
that a long file's speaker of many minutes costs the check encoder about a minute (0.9 s of one core)."""
MAX_GAP_S = 1.0
"""A pause this long between two words of one speaker ends a segment (as one between two transcript segments)."""
MIN_TURN_S = 1.0
"""A run of words shorter than this between two runs of one other speaker, in a region that a word of theirs
touches, is given to that speaker: one region's embedding is too short to say more."""


@dataclass(frozen=True)
class SpeakerCount:
    """A request's bounds on the speaker count (num_speakers is both): the clustering stops merging at
    ``low`` clusters and merges on, whatever the similarity, down to ``high``."""

    low: int = 1
    high: int | None = None


@dataclass(frozen=True)
class Region:
    """One embedded stretch of speech, in seconds of the upload."""

    start: float
    end: float


@dataclass(frozen=True)
class TimedWord:
    word: str
    start: float
    end: float
    segment: int
    """Index of the transcript segment it belongs to."""


@dataclass(frozen=True)
class SpeakerSegment:
    start: float
    end: float
    text: str
    speaker: str


def partial_starts(first: int, end: int, n_frames: int, hop: int, size: int = PARTIAL_FRAMES) -> list[int]:
    """First frames of the partials of ``size`` frames that embed the region [first, end) of a window of
    ``n_frames``: every ``hop`` frames, the last one ending at the region's end; a region shorter than a
    partial gets one partial centred on it (with the audio around it, or zeros past the window's ends)."""
    if end - first <= size:
        return [max(0, min(n_frames - size, (first + end) // 2 - size // 2))] if n_frames >= size else [0]
    starts = list(range(first, end - size + 1, hop))
    if end - size - starts[-1] > hop // 4:
        starts.append(end - size)
    return starts


def cluster(
    embeddings: np.ndarray,
    threshold: float,
    merge_threshold: float,
    min_points: float = 3,
    weights: np.ndarray | None = None,
    count: SpeakerCount = SpeakerCount(),
) -> tuple[np.ndarray, np.ndarray]:
    """(labels per partial, L2-normalised centroids per label); labels are 0..k-1. Two stages: average
    linkage down to ``threshold`` (pure clusters, a speaker often in several), then centroid linkage down to
    ``merge_threshold`` (a centroid of many partials is a far steadier voice print than one partial); both
    within ``count``'s bounds, which only fewer points than ``count.low`` can break. Then, while
    ``count.high`` allows, the clustering is asked for one speaker more (:func:`_one_more`)."""
    labels, centroids = _cluster(embeddings, threshold, merge_threshold, min_points, weights, count)
    while count.high is None or len(centroids) < count.high:
        more = _one_more(embeddings, threshold, merge_threshold, min_points, weights, centroids)
        if more is None:
            break
        labels, centroids = more
    return labels, centroids


def _one_more(
    embeddings: np.ndarray,
    threshold: float,
    merge_threshold: float,
    min_points: float,
    weights: np.ndarray | None,
    centroids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The clustering cut at one speaker more than ``centroids`` (:func:`one_more_cut`), if its new speaker is
    distinct: at least MIN_DISTINCT_POINTS partials and a centroid's cosine under DISTINCT_SIMILARITY with
    every other. A voice folded for being small, or in regions each too short to stay a cluster, gathers its
    regions there."""
    cut = one_more_cut(embeddings, threshold, merge_threshold, min_points, weights, centroids)
    if cut is None:
        return None
    labels, more, new = cut
    mass = np.bincount(labels, np.ones(len(labels)) if weights is None else weights, minlength=len(more))
    others = np.delete(more @ more[new], new)
    if mass[new] < MIN_DISTINCT_POINTS or others.max() >= DISTINCT_SIMILARITY:
        return None
    return labels, more


def one_more_cut(
    embeddings: np.ndarray,
    threshold: float,
    merge_threshold: float,
    min_points: float,
    weights: np.ndarray | None,
    centroids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(labels, centroids, the new speaker's label) of the clustering cut at one speaker more than
    ``centroids`` (the count's path: the fold keeps the heaviest clusters, then each region goes to its
    nearest centroid); the new speaker is the cluster least like the old centroids. None when there is no
    such cut."""
    k = len(centroids) + 1
    labels, more = _cluster(embeddings, threshold, merge_threshold, min_points, weights, SpeakerCount(k, k))
    if len(more) != k or len(centroids) == 0:
        return None
    return labels, more, int(np.argmin((more @ centroids.T).max(axis=1)))


def first_clusters(
    embeddings: np.ndarray, threshold: float, merge_threshold: float, weights: np.ndarray, count: SpeakerCount
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cluster` before its count step: (labels, centroids) of the two stages and the fold."""
    return _cluster(embeddings, threshold, merge_threshold, MIN_POINTS, weights, count)


@dataclass(frozen=True)
class CountCandidate:
    """The count step's next cut, to be kept when its new speaker's speech is unlike each nearest speaker's."""

    centroids: np.ndarray
    """The cut's centroids: one speaker more."""
    stretch: list[Region]
    """The new speaker's regions most like its centroid, up to CHECK_MAX_S of speech."""
    nearest: list[list[Region]]
    """The same of its CHECK_NEAREST nearest speakers, nearest first (those with under CHECK_MIN_S left out)."""


def count_candidate(
    embeddings: np.ndarray,
    regions: list[Region],
    threshold: float,
    merge_threshold: float,
    weights: np.ndarray,
    centroids: np.ndarray,
) -> CountCandidate | None:
    """The clustering cut at one speaker more than ``centroids`` (:func:`one_more_cut`) and the speech that
    decides it: a second encoder embeds each stretch whole, where a region's embedding of 0.2-3 s cannot
    tell two alike voices apart. None when there is no cut, or its new speaker has under CHECK_MIN_S of
    speech."""
    cut = one_more_cut(embeddings, threshold, merge_threshold, MIN_POINTS, weights, centroids)
    if cut is None:
        return None
    labels, more, new = cut
    mine = _typical(np.flatnonzero(labels == new), embeddings, regions)
    if mine is None:
        return None
    return CountCandidate(more, mine, [s for _, s in _nearest(new, labels, more, embeddings, regions)])


@dataclass(frozen=True)
class MergeCandidate:
    """A speaker with little speech, to be merged into the first of its nearest speakers that sounds the same."""

    speaker: int
    """Its row in the centroids."""
    stretch: list[Region]
    """Its regions most like its centroid, up to CHECK_MAX_S of speech."""
    nearest: list[tuple[int, list[Region]]]
    """Its CHECK_NEAREST nearest speakers (rows), nearest first, each with its own most typical speech."""


def merge_candidates(
    embeddings: np.ndarray, regions: list[Region], centroids: np.ndarray, weights: np.ndarray
) -> list[MergeCandidate]:
    """The speakers of ``centroids`` (each region to its nearest) with under MERGE_UNDER_S of speech but
    CHECK_MIN_S or more, the fewest first, each with the speech of its nearest speakers that it meets at
    MERGE_UNLIKE or over (:func:`likeness`)."""
    if len(centroids) < 2:
        return []
    labels = np.argmax(embeddings @ centroids.T, axis=1)
    speech = np.bincount(labels, [r.end - r.start for r in regions], minlength=len(centroids))
    out = []
    for k in np.argsort(speech, kind="stable"):
        if speech[k] >= MERGE_UNDER_S:
            break
        mine = _typical(np.flatnonzero(labels == k), embeddings, regions)
        if mine is None:
            continue
        nearest = [
            (j, stretch)
            for j, stretch in _nearest(int(k), labels, centroids, embeddings, regions)
            if likeness((mine, stretch), embeddings, weights, regions) >= MERGE_UNLIKE
        ]
        if nearest:
            out.append(MergeCandidate(int(k), mine, nearest))
    return out


def merge_speakers(embeddings: np.ndarray, centroids: np.ndarray, speaker: int, into: int) -> np.ndarray:
    """``centroids`` with ``speaker``'s regions given to ``into``: its row gone, ``into``'s centroid anew."""
    labels = np.argmax(embeddings @ centroids.T, axis=1)
    labels[labels == speaker] = into
    keep = [k for k in range(len(centroids)) if k != speaker and np.any(labels == k)]
    return _centroids(embeddings, labels)[keep]


def _nearest(
    k: int, labels: np.ndarray, centroids: np.ndarray, embeddings: np.ndarray, regions: list[Region]
) -> list[tuple[int, list[Region]]]:
    """Up to CHECK_NEAREST speakers nearest ``k`` by centroid, nearest first, each with its most typical
    speech; those under CHECK_MIN_S are left out."""
    sims = centroids @ centroids[k]
    sims[k] = -np.inf
    out = []
    for j in np.argsort(-sims, kind="stable")[: min(CHECK_NEAREST, len(centroids) - 1)]:
        stretch = _typical(np.flatnonzero(labels == j), embeddings, regions)
        if stretch is not None:
            out.append((int(j), stretch))
    return out


@dataclass(frozen=True)
class SplitCandidate:
    """A speaker cut in two, to be two speakers when its halves' stretches of speech are two voices."""

    speaker: int
    """Its row in the centroids."""
    halves: np.ndarray
    """The two halves' centroids."""
    stretches: tuple[list[Region], list[Region]]
    """Each half's regions most like its centroid, up to CHECK_MAX_S of speech."""
    members: tuple[int, ...] = ()
    """The speaker's regions (indices; every k-th past SPLIT_REGIONS_MAX_S of speech), each heard alone when
    the stretches leave the split unsure (:func:`sounds_apart`)."""


def split_candidates(
    embeddings: np.ndarray,
    regions: list[Region],
    threshold: float,
    merge_threshold: float,
    weights: np.ndarray,
    centroids: np.ndarray,
) -> list[SplitCandidate]:
    """The speakers of ``centroids`` (each region to its nearest) whose clustering cut at two gives halves
    under SPLIT_SIMILARITY with CHECK_MIN_S of speech or more each: the count step asks for one speaker more
    over the whole conversation, and its candidate is often a stray part of one voice while two others stay
    merged elsewhere."""
    labels = np.argmax(embeddings @ centroids.T, axis=1) if len(centroids) else np.zeros(0, dtype=np.int64)
    out = []
    for c in range(len(centroids)):
        idx = np.flatnonzero(labels == c)
        if len(idx) < 2:
            continue
        sub, halves = _cluster(
            embeddings[idx], threshold, merge_threshold, MIN_POINTS, weights[idx], SpeakerCount(2, 2)
        )
        candidate = _halves(c, idx, sub, halves, SPLIT_SIMILARITY, embeddings, weights, regions)
        if candidate is None and len(idx) >= 4:
            side = _two_means(embeddings[idx], weights[idx])
            if side.any() and not side.all():
                sub = (~side).astype(np.int64)
                halves = np.stack(
                    [_normalise((embeddings[idx] * weights[idx, None])[sub == h].sum(axis=0)) for h in (0, 1)]
                )
                candidate = _halves(c, idx, sub, halves, TWO_MEANS_SIMILARITY, embeddings, weights, regions)
        if candidate is not None:
            out.append(candidate)
    return out


def _halves(
    c: int,
    idx: np.ndarray,
    sub: np.ndarray,
    halves: np.ndarray,
    gate: float,
    embeddings: np.ndarray,
    weights: np.ndarray,
    regions: list[Region],
) -> SplitCandidate | None:
    """Speaker ``c`` cut in two (``sub``: each of its regions' half) as a candidate to hear: None when the
    halves' centroids meet at ``gate`` or over, or one half has under CHECK_MIN_S of speech. The candidate's
    halves are redrawn from its stretches (:func:`redraw`)."""
    if len(halves) != 2 or float(halves[0] @ halves[1]) >= gate:
        return None
    a = _typical(idx[sub == 0], embeddings, regions)
    b = _typical(idx[sub == 1], embeddings, regions)
    if a is None or b is None:
        return None
    seeds = _stretch_vectors((a, b), embeddings, weights, regions)
    if float(seeds[0] @ seeds[1]) >= SPLIT_ALIKE:  # the stretches' likeness
        return None
    members = tuple(_spread(idx, regions, SPLIT_REGIONS_MAX_S).tolist())
    return SplitCandidate(c, _redraw_from(idx, seeds, halves, embeddings, weights), (a, b), members)


def redraw(
    idx: np.ndarray,
    stretches: tuple[list[Region], list[Region]],
    halves: np.ndarray,
    embeddings: np.ndarray,
    weights: np.ndarray,
    regions: list[Region],
) -> np.ndarray:
    """The halves' centroids once each region of ``idx`` goes to the nearer of the two stretches' centroids
    (``halves`` when all go to one): a cut of two alike voices mixes them (seed 2's hard21: 5.3 s of one
    voice on the other's side), while each stretch is its half's most typical speech."""
    return _redraw_from(idx, _stretch_vectors(stretches, embeddings, weights, regions), halves, embeddings, weights)


def _redraw_from(
    idx: np.ndarray, seeds: list[np.ndarray], halves: np.ndarray, embeddings: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """:func:`redraw` with the stretches' centroids already made (``seeds``)."""
    side = embeddings[idx] @ seeds[0] >= embeddings[idx] @ seeds[1]
    if side.all() or not side.any():
        return halves
    return np.stack([_normalise((embeddings[idx[s]] * weights[idx[s], None]).sum(axis=0)) for s in (side, ~side)])


def _stretch_vectors(
    stretches: tuple[list[Region], list[Region]], embeddings: np.ndarray, weights: np.ndarray, regions: list[Region]
) -> list[np.ndarray]:
    """Each stretch's centroid: its regions' embeddings, weighted by their partials."""
    at = {r: i for i, r in enumerate(regions)}
    return [_normalise(sum(embeddings[at[r]] * weights[at[r]] for r in stretch)) for stretch in stretches]


def likeness(
    stretches: tuple[list[Region], list[Region]], embeddings: np.ndarray, weights: np.ndarray, regions: list[Region]
) -> float:
    """The cosine of two stretches' centroids (:func:`_stretch_vectors`): where it is far from the check
    encoder's verdicts (MERGE_UNLIKE, SPLIT_ALIKE), the stretches need not be heard."""
    a, b = _stretch_vectors(stretches, embeddings, weights, regions)
    return float(a @ b)


def _spread(idx: np.ndarray, regions: list[Region], max_s: float) -> np.ndarray:
    """``idx`` whole when its regions hold ``max_s`` of speech or less, else every k-th of them: about that
    much, from all over the conversation."""
    total = sum(regions[i].end - regions[i].start for i in idx)
    return idx if total <= max_s else idx[:: math.ceil(total / max_s)]


def unsure(cosine: float) -> bool:
    """Whether a split's two stretches meeting at ``cosine`` leave it to its regions heard alone
    (:func:`sounds_apart`): between CHECK_DIFFERENT and CHECK_SAME."""
    return CHECK_DIFFERENT <= cosine < CHECK_SAME


def sounds_apart(
    candidate: SplitCandidate, heard: list[np.ndarray], stretches: tuple[np.ndarray, np.ndarray], regions: list[Region]
) -> float:
    """How alike a split's halves sound over all their speech: each of its members (``heard``: the check
    encoder's vector of each alone) goes with the stretch (``stretches``: theirs) it sounds nearer, and the
    two groups' mean vectors, weighted by speech, meet at this cosine (1.0 when all go one way: one voice)."""
    vectors = np.asarray(heard)
    side = vectors @ stretches[0] >= vectors @ stretches[1]
    if side.all() or not side.any():
        return 1.0
    speech = np.array([regions[i].end - regions[i].start for i in candidate.members])
    sounds = [_normalise((vectors[s] * speech[s, None]).sum(axis=0)) for s in (side, ~side)]
    return float(sounds[0] @ sounds[1])


def _two_means(points: np.ndarray, weights: np.ndarray, rounds: int = 10) -> np.ndarray:
    """Each point's side (True or False) of a cut in two: first along the principal direction of the
    weighted points, then each point to the nearer side's centroid until nothing moves."""
    w = np.asarray(weights, dtype=np.float64)
    centred = points - (points * w[:, None]).sum(axis=0) / w.sum()
    _, _, directions = np.linalg.svd(centred * np.sqrt(w)[:, None], full_matrices=False)
    side = centred @ directions[0] > 0
    for _ in range(rounds):
        if side.all() or not side.any():
            break
        a = _normalise((points[side] * w[side, None]).sum(axis=0))
        b = _normalise((points[~side] * w[~side, None]).sum(axis=0))
        moved = points @ a > points @ b
        if np.array_equal(moved, side):
            break
        side = moved
    return side


def split(centroids: np.ndarray, splits: list[SplitCandidate]) -> np.ndarray:
    """``centroids`` with each split speaker's row replaced by its first half's, its second half's added."""
    out = centroids.copy()
    for s in splits:
        out[s.speaker] = s.halves[0]
    return np.concatenate([out, np.array([s.halves[1] for s in splits]).reshape(-1, centroids.shape[1])])


def _typical(idx: np.ndarray, embeddings: np.ndarray, regions: list[Region]) -> list[Region] | None:
    """The regions of ``idx`` most like their centroid, until CHECK_MAX_S of speech, in time order; None when
    they are under CHECK_MIN_S in all."""
    order = idx[np.argsort(-(embeddings[idx] @ _normalise(embeddings[idx].sum(axis=0))), kind="stable")]
    kept: list[int] = []
    total = 0.0
    for i in order:
        if total >= CHECK_MAX_S:
            break
        kept.append(int(i))
        total += regions[i].end - regions[i].start
    return [regions[i] for i in sorted(kept)] if total >= CHECK_MIN_S else None


def _cluster(
    embeddings: np.ndarray,
    threshold: float,
    merge_threshold: float,
    min_points: float,
    weights: np.ndarray | None,
    count: SpeakerCount,
) -> tuple[np.ndarray, np.ndarray]:
    n = len(embeddings)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, embeddings.shape[1] if embeddings.ndim == 2 else 0))
    point_weights = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    group = max(1, math.ceil(n / MAX_POINTS))
    firsts = np.arange(0, n, group)
    points = (
        _normalise(np.add.reduceat(embeddings * point_weights[:, None], firsts, axis=0)) if group > 1 else embeddings
    )
    weights = np.add.reduceat(point_weights, firsts)
    members = _agglomerate(points, weights, threshold, count.low)
    members = _merge_centroids(points, weights, members, merge_threshold, SpeakerCount(count.low))
    centroids = _centroids(points, members)
    mass = np.bincount(members, weights)
    big = [k for k in range(len(centroids)) if mass[k] >= min_points]
    if big and len(big) < count.low:  # the bound keeps the heaviest small ones too
        big = sorted(np.argsort(-mass)[: count.low].tolist())
    if big and len(big) < len(centroids):
        centroids = centroids[big]
    if count.high is not None and len(centroids) > count.high:
        # The upper bound only once the small clusters are folded: merged before, a cough would stay a
        # speaker and two real speakers would become one.
        members = _merge_centroids(points, weights, np.argmax(points @ centroids.T, axis=1), merge_threshold, count)
        centroids = _centroids(points, members)
    labels = np.argmax(embeddings @ centroids.T, axis=1)
    for _ in range(2):  # settle: centroids of what was assigned, then assign again
        keep = [k for k in range(len(centroids)) if np.any(labels == k)]
        centroids = _centroids(embeddings, labels)[keep]
        labels = np.argmax(embeddings @ centroids.T, axis=1)
    return labels, centroids


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _centroids(points: np.ndarray, labels: np.ndarray) -> np.ndarray:
    k = int(labels.max()) + 1 if len(labels) else 0
    sums = np.zeros((k, points.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, points)
    return _normalise(sums)


def _agglomerate(points: np.ndarray, weights: np.ndarray, threshold: float, low: int = 1) -> np.ndarray:
    """Average-linkage merges (Lance-Williams updates on the similarity matrix) while the best pair's
    average similarity is at least ``threshold`` and more than ``low`` clusters are left; returns each
    point's cluster, numbered 0..k-1."""
    m = len(points)
    sim = (points @ points.T).astype(np.float64)
    np.fill_diagonal(sim, -np.inf)
    size = weights.copy()
    owner = np.arange(m)
    alive = np.ones(m, dtype=bool)
    for _ in range(m - low):
        flat = int(np.argmax(sim))
        i, j = divmod(flat, m)
        if sim[i, j] < threshold:
            break
        merged = (size[i] * sim[i] + size[j] * sim[j]) / (size[i] + size[j])
        sim[i], sim[:, i] = merged, merged
        sim[j], sim[:, j] = -np.inf, -np.inf
        sim[i, i] = -np.inf
        size[i] += size[j]
        alive[j] = False
        owner[owner == j] = i
    _, labels = np.unique(owner, return_inverse=True)
    return labels


def _merge_centroids(
    points: np.ndarray, weights: np.ndarray, labels: np.ndarray, threshold: float, count: SpeakerCount = SpeakerCount()
) -> np.ndarray:
    """Merge the two clusters whose centroids are most alike while that similarity is ``threshold`` or more,
    or more than ``count.high`` clusters are left, but never below ``count.low``."""
    labels = labels.copy()
    while True:
        ids = np.unique(labels)
        if len(ids) <= max(1, count.low):
            return np.unique(labels, return_inverse=True)[1]
        cents = _normalise(np.stack([(points[labels == k] * weights[labels == k, None]).sum(0) for k in ids]))
        sim = cents @ cents.T
        np.fill_diagonal(sim, -np.inf)
        i, j = divmod(int(np.argmax(sim)), len(ids))
        if sim[i, j] < threshold and (count.high is None or len(ids) <= count.high):
            return np.unique(labels, return_inverse=True)[1]
        labels[labels == ids[j]] = ids[i]


def label_words(
    words: list[TimedWord],
    regions: list[Region],
    similarity: np.ndarray,
    min_turn_s: float,
) -> list[int]:
    """The speaker (a column of ``similarity``: regions x speakers) of each word; see the module docstring."""
    if not words:
        return []
    if not regions:
        return [0] * len(words)
    starts = np.array([r.start for r in regions])
    ends = np.array([r.end for r in regions])
    out = []
    held: list[frozenset[int]] = []
    for w in words:
        a, b = w.start, max(w.end, w.start + 0.02)
        overlap = np.minimum(ends, b) - np.maximum(starts, a)
        near = overlap > 0
        if not near.any():  # no region reaches it: the nearest in time decides
            gap = np.maximum(starts - b, a - ends)
            near = gap <= gap.min() + 1e-6
            overlap = near.astype(np.float64)
        score = (np.clip(overlap, 0, None)[near, None] * similarity[near]).sum(axis=0)
        out.append(int(np.argmax(score)))
        held.append(frozenset(np.flatnonzero(near).tolist()))
    return _smooth(words, out, min_turn_s, held)


def _smooth(words: list[TimedWord], labels: list[int], min_turn_s: float, held: list[frozenset[int]]) -> list[int]:
    runs: list[list[int]] = []  # [label, first word, last word + 1]
    for i, label in enumerate(labels):
        if runs and runs[-1][0] == label:
            runs[-1][2] = i + 1
        else:
            runs.append([label, i, i + 1])
    changed = True
    while changed and len(runs) > 1:
        changed = False
        for r in range(len(runs)):
            label, first, stop = runs[r]
            if words[stop - 1].end - words[first].start >= min_turn_s:
                continue
            if _own_regions(runs, r, held):
                continue
            before = runs[r - 1][0] if r > 0 else None
            after = runs[r + 1][0] if r + 1 < len(runs) else None
            if before is not None and (after is None or after == before):
                runs[r - 1][2] = stop
                if after is not None:
                    runs[r - 1][2] = runs[r + 1][2]
                    del runs[r + 1]
                del runs[r]
                changed = True
                break
            if before is None and after is not None:
                runs[r + 1][1] = first
                del runs[r]
                changed = True
                break
    out = list(labels)
    for label, first, stop in runs:
        out[first:stop] = [label] * (stop - first)
    return out


def _own_regions(runs: list[list[int]], r: int, held: list[frozenset[int]]) -> bool:
    """Whether run ``r``'s words lie in regions that no word of the runs beside it touches: a reply between
    pauses, embedded on its own, whose speaker is its own region's."""
    mine = frozenset().union(*held[runs[r][1] : runs[r][2]])
    for k in (r - 1, r + 1):
        if 0 <= k < len(runs) and mine & frozenset().union(*held[runs[k][1] : runs[k][2]]):
            return False
    return True


def name_speakers(
    order: list[int], centroids: np.ndarray, references: list[tuple[str, np.ndarray]], known_threshold: float
) -> dict[int, str]:
    """Label -> name for the labels in ``order`` (first appearance): known names where a reference matches,
    else letters A, B, C... in order of first appearance among the others."""
    names: dict[int, str] = {}
    if references and len(centroids):
        ref = _normalise(np.stack([r for _, r in references]))
        sim = centroids @ ref.T
        pairs = sorted(((sim[k, r], k, r) for k in range(sim.shape[0]) for r in range(sim.shape[1])), reverse=True)
        used: set[int] = set()
        for s, k, r in pairs:
            if s >= known_threshold and k not in names and r not in used:
                names[k] = references[r][0]
                used.add(r)
    letter = 0
    for label in order:
        if label not in names:
            names[label] = _letters(letter)
            letter += 1
    return names


def _letters(i: int) -> str:
    """A, B, ..., Z, AA, AB, ..."""
    out = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def speaker_segments(
    words: list[TimedWord],
    labels: list[int],
    names: dict[int, str],
    regions: list[Region],
    max_gap_s: float = MAX_GAP_S,
) -> list[SpeakerSegment]:
    """Runs of words of one speaker within one transcript segment (a pause of ``max_gap_s`` also cuts), each
    stretched to the edges of the speech regions it overlaps, but not past its neighbours' words: Whisper's
    word times are coarse (a first word that "starts" late or at the window's start, a last one that runs
    into the pause), the regions' edges are the 10 ms frames where the sound starts and stops."""
    runs: list[tuple[list[TimedWord], int]] = []
    for w, label in zip(words, labels):
        last = runs[-1][0] if runs else None
        if last and label == runs[-1][1] and w.segment == last[-1].segment and w.start - last[-1].end <= max_gap_s:
            last.append(w)
        else:
            runs.append(([w], label))
    starts = np.array([r.start for r in regions])
    ends = np.array([r.end for r in regions])
    out: list[SpeakerSegment] = []
    for i, (run, label) in enumerate(runs):
        start, end = run[0].start, run[-1].end
        near = (ends > start) & (starts < end)
        if near.any():
            floor = out[-1].end if out else 0.0
            ceiling = runs[i + 1][0][0].start if i + 1 < len(runs) else math.inf
            start = max(float(starts[near].min()), min(floor, start))
            end = min(float(ends[near].max()), max(ceiling, end))
        text = "".join(w.word for w in run).strip()
        out.append(SpeakerSegment(start, max(end, start), text, names[label]))
    return out


def diarize(
    words: list[TimedWord],
    regions: list[Region],
    embeddings: np.ndarray,
    weights: np.ndarray,
    references: list[tuple[str, np.ndarray]],
    threshold: float,
    merge_threshold: float,
    known_threshold: float,
    min_turn_s: float,
    count: SpeakerCount = SpeakerCount(),
) -> list[SpeakerSegment]:
    """The transcript's words as segments of one speaker each, named (see the module docstring)."""
    _, centroids = cluster(embeddings, threshold, merge_threshold, MIN_POINTS, weights, count)
    return segments_of(words, regions, embeddings, centroids, references, known_threshold, min_turn_s)


def segments_of(
    words: list[TimedWord],
    regions: list[Region],
    embeddings: np.ndarray,
    centroids: np.ndarray,
    references: list[tuple[str, np.ndarray]],
    known_threshold: float,
    min_turn_s: float,
) -> list[SpeakerSegment]:
    """The words' segments once the speakers' ``centroids`` are known: each word's speaker, the names, the runs."""
    similarity = embeddings @ centroids.T if len(centroids) else np.zeros((len(regions), 1))
    word_labels = label_words(words, regions, similarity, min_turn_s)
    order = list(dict.fromkeys(word_labels))
    names = name_speakers(order, centroids, references, known_threshold)
    return speaker_segments(words, word_labels, names, regions)
