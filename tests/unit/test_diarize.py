"""Diarization's pure functions (voxlane/speakers/diarize.py) on made-up voice prints: the automatic speaker
count of ``cluster`` and the word -> speaker assignment of ``label_words``, without the encoder or a server.

A voice is a random unit vector in 64 dimensions; a region of it is that vector plus Gaussian noise of
variance ``noise`` (split over the dimensions), normalised, so two regions of one voice have cosine about
1 / (1 + noise) and regions of two voices about 0: what the GE2E encoder gives is 0.81 and 0.54 on the dev
set's sentences (docs/diarization.md), the thresholds 0.65 and 0.8 sit between."""

from __future__ import annotations

import numpy as np
import pytest

from voxlane.speakers import diarize as diarize_module
from voxlane.speakers.diarize import (
    MAX_POINTS,
    MERGE_UNLIKE,
    MIN_POINTS,
    SPLIT_ALIKE,
    SPLIT_REGIONS_DIFFERENT,
    SPLIT_REGIONS_MAX_S,
    SPLIT_SIMILARITY,
    TWO_MEANS_SIMILARITY,
    Region,
    SpeakerCount,
    SplitCandidate,
    TimedWord,
    cluster,
    count_candidate,
    diarize,
    first_clusters,
    label_words,
    likeness,
    merge_candidates,
    merge_speakers,
    redraw,
    sounds_apart,
    speaker_segments,
    split,
    split_candidates,
)

DIM = 64
THRESHOLD, MERGE_THRESHOLD = 0.65, 0.8  # the server's defaults (--diarize-threshold, --diarize-merge-threshold)


def voices(n: int, rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal((n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def regions_of(centre: np.ndarray, count: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    x = centre + rng.standard_normal((count, DIM)) * np.sqrt(noise / DIM)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def conversation(n_speakers: int, turns: int, per_turn: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(region embeddings, true speaker of each), speakers taking turns of ``per_turn`` regions."""
    rng = np.random.default_rng(seed)
    centres = voices(n_speakers, rng)
    truth = np.repeat(np.arange(turns) % n_speakers, per_turn)
    embeddings = np.concatenate([regions_of(centres[s], per_turn, noise, rng) for s in truth[::per_turn]])
    return embeddings, truth


def agreement(labels: np.ndarray, truth: np.ndarray) -> float:
    """Share of regions whose label is the one most of their true speaker's regions got."""
    right = sum(int(np.bincount(labels[truth == s]).max()) for s in np.unique(truth))
    return right / len(truth)


@pytest.mark.parametrize("n_speakers", [1, 2, 3, 4])
def test_the_speaker_count_is_found(n_speakers: int) -> None:
    for seed in range(5):
        embeddings, truth = conversation(n_speakers, 4 * n_speakers, 5, noise=0.3, seed=seed)
        labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(len(truth), 2.0))
        assert len(centroids) == n_speakers, f"seed {seed}"
        assert agreement(labels, truth) == 1.0
        assert np.allclose(np.linalg.norm(centroids, axis=1), 1.0)


def test_a_voice_split_by_average_linkage_is_merged_by_its_centroids() -> None:
    # One speaker in two manners (cosine 0.85 between them: a raised voice, another microphone): two
    # regions of different manners are only about 0.58 alike, under the first stage's 0.65, but the two
    # clusters' centroids are about 0.84 alike, over the second stage's 0.8. Another speaker stays apart.
    rng = np.random.default_rng(3)
    a, other = voices(2, rng)
    side = rng.standard_normal(DIM)
    side -= (side @ a) * a
    side /= np.linalg.norm(side)
    a2 = 0.85 * a + np.sqrt(1 - 0.85**2) * side
    embeddings = np.concatenate(
        [regions_of(a, 20, 0.45, rng), regions_of(a2, 20, 0.45, rng), regions_of(other, 20, 0.45, rng)]
    )
    truth = np.repeat([0, 0, 1], 20)
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(60, 2.0))
    assert len(centroids) == 2
    assert agreement(labels, truth) == 1.0


def test_a_speaker_with_too_little_speech_is_folded_into_the_nearest() -> None:
    # Two speakers, and a cough: two short regions (one partial each, 2 < MIN_POINTS) of a third voice.
    rng = np.random.default_rng(5)
    a, b, cough = voices(3, rng)
    embeddings = np.concatenate(
        [regions_of(a, 10, 0.3, rng), regions_of(b, 10, 0.3, rng), regions_of(cough, 2, 0.3, rng)]
    )
    weights = np.array([2.0] * 20 + [1.0] * 2)
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, weights)
    assert len(centroids) == 2
    assert set(labels[20:]) <= set(labels[:20])
    # The same voice with enough speech (3 regions of 2 partials) is a speaker of its own.
    weights[20:] = 3.0
    assert len(cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, weights)[1]) == 3


def test_a_speaker_who_says_little_is_kept_when_unlike_every_other() -> None:
    # Two speakers, and a third who says little: two regions of 2 partials (4 < MIN_POINTS). A voice unlike
    # both is a speaker; the same speech in a voice close to the first speaker's (cosine 0.8) is folded.
    rng = np.random.default_rng(6)
    a, b, other = voices(3, rng)
    close = a + 0.75 * (other - (other @ a) * a) / np.linalg.norm(other - (other @ a) * a)  # cosine 0.8 with a
    weights = np.array([2.0] * 22)
    for third, speakers in ((other, 3), (close / np.linalg.norm(close), 2)):
        embeddings = np.concatenate(
            [regions_of(a, 10, 0.3, rng), regions_of(b, 10, 0.3, rng), regions_of(third, 2, 0.3, rng)]
        )
        labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, weights)
        assert len(centroids) == speakers
        if speakers == 2:
            assert set(labels[20:]) == {labels[0]}


def toward(a: np.ndarray, other: np.ndarray, cosine: float) -> np.ndarray:
    """A unit voice whose cosine with ``a`` is ``cosine``, turned toward ``other``."""
    side = other - (other @ a) * a
    return cosine * a + np.sqrt(1 - cosine**2) * side / np.linalg.norm(side)


def test_a_speaker_who_says_little_is_kept_up_to_a_cosine_of_072_with_another() -> None:
    # Two speakers, and a third with two steady regions of 2 partials (4 < MIN_POINTS) whose centroid is 0.71
    # alike the first speaker's: under DISTINCT_SIMILARITY (0.72), so the count step keeps it.
    rng = np.random.default_rng(1)
    a, b, other = voices(3, rng)
    embeddings = np.concatenate(
        [regions_of(a, 10, 0.3, rng), regions_of(b, 10, 0.3, rng), regions_of(toward(a, other, 0.73), 2, 0.1, rng)]
    )
    truth = np.repeat([0, 1, 2], [10, 10, 2])
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(22, 2.0))
    assert len(centroids) == 3
    assert agreement(labels, truth) == 1.0
    assert 0.70 < float(centroids[labels[0]] @ centroids[labels[-1]]) < 0.72


@pytest.mark.parametrize(("cosine", "speakers"), [(0.65, 3), (0.85, 2)])
def test_a_voice_in_regions_too_short_for_a_cluster_is_found_by_asking_for_one_more(
    cosine: float, speakers: int
) -> None:
    # A third voice in two regions of 2 partials each, each on its own after the first stage (0.64 alike):
    # too small to be kept (2 < MIN_DISTINCT_POINTS), both are folded into the first speaker. Cut at three
    # speakers, the clustering keeps one, the other joins it: 4 partials, unlike both others, so a speaker.
    # A voice close to the first speaker's (0.85) is not: the third cluster of that cut is too alike.
    rng = np.random.default_rng(21)
    a, b, other = voices(3, rng)
    embeddings = np.concatenate(
        [regions_of(a, 10, 0.5, rng), regions_of(b, 10, 0.5, rng), regions_of(toward(a, other, cosine), 2, 0.5, rng)]
    )
    truth = np.repeat([0, 1, 2 if speakers == 3 else 0], [10, 10, 2])
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(22, 2.0))
    assert len(centroids) == speakers
    assert agreement(labels, truth) == 1.0


def test_a_long_file_is_clustered_in_bounded_work_and_every_region_is_assigned() -> None:
    # More than MAX_POINTS regions (an hour is about 1,200): runs of neighbours are averaged before the
    # clustering, then each region goes to its nearest centroid.
    embeddings, truth = conversation(3, 60, 25, noise=0.3, seed=11)
    assert len(truth) > 2 * MAX_POINTS
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(len(truth), 2.0))
    assert len(labels) == len(truth)
    assert len(centroids) == 3
    assert agreement(labels, truth) >= 0.98


def words_at(*spans: tuple[float, float], segment: int = 0) -> list[TimedWord]:
    return [TimedWord(f" w{i}", a, b, segment) for i, (a, b) in enumerate(spans)]


# Regions: speaker 0 from 0 to 3 s, speaker 1 from 3.2 to 6 s, speaker 0 again from 6.5 to 9 s.
REGIONS = [Region(0.0, 3.0), Region(3.2, 6.0), Region(6.5, 9.0)]
SIMILARITY = np.array([[0.9, 0.2], [0.3, 0.8], [0.85, 0.1]])  # regions x speakers


def test_each_word_takes_the_speaker_of_the_regions_under_it() -> None:
    words = words_at((0.2, 0.6), (1.0, 2.9), (3.3, 4.0), (4.1, 5.9), (6.6, 7.5), (7.6, 8.8))
    assert label_words(words, REGIONS, SIMILARITY, min_turn_s=1.0) == [0, 0, 1, 1, 0, 0]


def test_a_word_across_a_change_of_speaker_goes_where_most_of_it_lies() -> None:
    # Whisper's word times are coarse: a last word that runs into the next turn (2.5-3.6 s: 0.5 s over the
    # first region, 0.4 s over the second) and a first word that starts in the pause before its turn.
    words = words_at((1.0, 2.4), (2.5, 3.6), (3.9, 4.7), (4.8, 5.9))
    assert label_words(words, REGIONS, SIMILARITY, min_turn_s=0.0) == [0, 0, 1, 1]
    words = words_at((1.0, 2.4), (2.5, 2.9), (2.95, 3.9), (4.0, 5.9))  # 0.05 s over the first, 0.7 s the second
    assert label_words(words, REGIONS, SIMILARITY, min_turn_s=0.0) == [0, 0, 1, 1]


def test_a_word_over_no_region_takes_the_nearest_one_in_time() -> None:
    words = words_at((6.05, 6.15), (6.35, 6.45))  # in the pause between 6.0 and 6.5: nearer 6.0, then 6.5
    assert label_words(words, REGIONS, SIMILARITY, min_turn_s=0.0) == [1, 0]


def test_a_short_run_between_two_runs_of_one_speaker_is_given_to_them() -> None:
    # One region in the middle of speaker 0's turn sounds like speaker 1 (a laugh), and a word of the turn
    # reaches into it: its 0.55 s of words are under min_turn_s and go to speaker 0; a run of 1.8 s is a turn
    # and stays.
    regions = [Region(0.0, 2.0), Region(2.1, 2.7), Region(2.8, 5.0)]
    similarity = np.array([[0.9, 0.2], [0.4, 0.7], [0.9, 0.1]])
    words = words_at((0.1, 1.0), (1.1, 2.15), (2.15, 2.7), (2.9, 4.0), (4.1, 4.9))
    assert label_words(words, regions, similarity, min_turn_s=0.0) == [0, 0, 1, 0, 0]
    assert label_words(words, regions, similarity, min_turn_s=1.0) == [0, 0, 0, 0, 0]
    regions[1] = Region(2.1, 3.9)
    regions[2] = Region(4.0, 5.4)
    words = words_at((0.1, 1.0), (1.1, 1.9), (2.1, 3.0), (3.0, 3.9), (4.1, 4.6), (4.7, 5.3))
    assert label_words(words, regions, similarity, min_turn_s=1.0) == [0, 0, 1, 1, 0, 0]


def test_a_short_reply_in_regions_of_its_own_keeps_its_speaker() -> None:
    # "Yes" between two turns of speaker 0, with pauses either side: its region (2.1-2.7 s) holds no word of
    # the turns around it, so its own embedding says who spoke, however short.
    regions = [Region(0.0, 2.0), Region(2.1, 2.7), Region(2.8, 5.0)]
    similarity = np.array([[0.9, 0.2], [0.4, 0.7], [0.9, 0.1]])
    words = words_at((0.1, 1.0), (1.1, 1.9), (2.1, 2.7), (2.9, 4.0), (4.1, 4.9))
    assert label_words(words, regions, similarity, min_turn_s=1.0) == [0, 0, 1, 0, 0]


def test_segments_reach_the_edges_of_their_regions_but_not_their_neighbours_words() -> None:
    # Whisper's first word of speaker 0 starts 0.4 s late and its last ends 0.5 s early: the segment takes
    # its region's edges (0.2-2.0 s). Speaker 1's turn shares a region (2.4-5.0 s) with speaker 0's next
    # one: each of those reaches the region's edge on its outer side only, and stops at the other's words.
    regions = [Region(0.2, 2.0), Region(2.4, 5.0)]
    words = words_at((0.6, 1.0), (1.1, 1.5), (2.6, 3.2), (3.3, 3.6), (3.9, 4.4), segment=0)
    segments = speaker_segments(words, [0, 0, 1, 1, 0], {0: "A", 1: "B"}, regions)
    assert [(s.speaker, s.start, s.end) for s in segments] == [
        ("A", 0.2, 2.0),
        ("B", 2.4, 3.9),
        ("A", 3.9, 5.0),
    ]


def test_diarize_names_speakers_in_order_of_appearance_and_cuts_segments_at_changes() -> None:
    rng = np.random.default_rng(2)
    a, b = voices(2, rng)
    regions = [Region(2.0 * k, 2.0 * k + 1.8) for k in range(12)]
    who = [1] * 6 + [0] * 6  # the second voice speaks first: it is A
    embeddings = np.stack([regions_of([a, b][s], 1, 0.3, rng)[0] for s in who]).astype(np.float32)
    words = [TimedWord(f" w{k}", 2.0 * k + 0.1, 2.0 * k + 1.7, k // 4) for k in range(12)]
    segments = diarize(words, regions, embeddings, np.full(12, 2.0), [], THRESHOLD, MERGE_THRESHOLD, 0.7, 1.0)
    assert [(s.speaker, s.text) for s in segments] == [
        ("A", "w0 w1 w2 w3"),
        ("A", "w4 w5"),
        ("B", "w6 w7"),
        ("B", "w8 w9 w10 w11"),
    ]
    assert segments[0].start == pytest.approx(0.0) and segments[-1].end == pytest.approx(23.8)


@pytest.mark.parametrize(("n_speakers", "asked"), [(2, 1), (2, 3), (3, 2), (3, 4), (1, 2)])
def test_num_speakers_gives_exactly_that_many(n_speakers: int, asked: int) -> None:
    # Fewer than the voices: the most alike are merged past the threshold; more: the cut of the clustering
    # at that many (a voice split in two). Either way every true speaker's regions stay together or are split,
    # never mixed with another's when there are enough clusters.
    for seed in range(3):
        embeddings, truth = conversation(n_speakers, 4 * n_speakers, 5, noise=0.3, seed=seed)
        count = SpeakerCount(asked, asked)
        labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(len(truth), 2.0), count)
        assert len(centroids) == asked, f"seed {seed}"
        if asked >= n_speakers:
            assert agreement(truth, labels) == 1.0  # each cluster holds one true speaker's regions


def test_min_and_max_speakers_clamp_the_automatic_count() -> None:
    embeddings, truth = conversation(3, 12, 5, noise=0.3, seed=1)
    weights = np.full(len(truth), 2.0)

    def found(low: int, high: int | None) -> int:
        count = SpeakerCount(low, high)
        return len(cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, weights, count)[1])

    assert found(1, None) == 3
    assert found(2, 5) == 3  # within the bounds: the automatic count
    assert found(4, None) == 4
    assert found(1, 2) == 2


def test_more_speakers_than_regions_gives_one_a_region() -> None:
    embeddings, _ = conversation(2, 2, 2, noise=0.3, seed=4)  # four regions
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, np.full(4, 2.0), SpeakerCount(6, 6))
    assert len(centroids) == 4
    assert sorted(labels.tolist()) == [0, 1, 2, 3]


def test_num_speakers_folds_a_cough_before_merging_speakers() -> None:
    # Two speakers who sound alike (cosine 0.5, as two voices of the dev set) and a cough (a voice unlike
    # both, with too little speech): num_speakers=2 must give the two speakers, the cough folded into one of
    # them, not the cough kept and the two speakers merged as the most alike pair.
    rng = np.random.default_rng(5)
    a, side, cough = voices(3, rng)
    side -= (side @ a) * a
    b = 0.5 * a + np.sqrt(0.75) * side / np.linalg.norm(side)
    cough -= (cough @ a) * a + (cough @ b) * b
    cough /= np.linalg.norm(cough)
    embeddings = np.concatenate(
        [regions_of(a, 10, 0.3, rng), regions_of(b, 10, 0.3, rng), regions_of(cough, 2, 0.3, rng)]
    )
    weights = np.array([2.0] * 20 + [1.0] * 2)
    labels, centroids = cluster(embeddings, THRESHOLD, MERGE_THRESHOLD, MIN_POINTS, weights, SpeakerCount(2, 2))
    assert len(centroids) == 2
    assert agreement(labels[:20], np.repeat([0, 1], 10)) == 1.0 and labels[0] != labels[10]


def _check_case(third_s: list[float]) -> tuple[np.ndarray, list[Region], np.ndarray]:
    """Two speakers of 10 regions of 1 s, alternating (A's at 0, 2, 4... s), then a third voice, 0.4 alike
    A's, in 4 regions of 1 partial (folded at first: the count step's candidate) of ``third_s`` seconds: the
    first and third steady, the others noisy."""
    rng = np.random.default_rng(6)
    a, b, other = voices(3, rng)
    third = toward(a, other, 0.4)
    steady, noisy = regions_of(third, 2, 0.05, rng), regions_of(third, 2, 0.6, rng)
    embeddings = np.concatenate(
        [regions_of(a, 10, 0.3, rng), regions_of(b, 10, 0.3, rng), steady[:1], noisy[:1], steady[1:], noisy[1:]]
    )
    starts = [2.0 * i for i in range(10)] + [2.0 * i + 1 for i in range(10)] + [30.0, 35.0, 40.0, 45.0]
    regions = [Region(s, s + d) for s, d in zip(starts, [1.0] * 20 + third_s)]
    return embeddings, regions, np.array([2.0] * 20 + [1.0] * 4)


def test_the_count_check_hears_the_candidates_most_typical_speech_and_its_nearest_speakers() -> None:
    # The candidate's steady regions (2.5 + 2.0 s) reach CHECK_MAX_S before its noisy ones are needed; it is
    # heard against each other speaker (2 here, under CHECK_NEAREST), nearest first: A (the third voice is
    # 0.4 alike A's), then B, each by its own 4 regions most like its centroid, in time order.
    embeddings, regions, weights = _check_case([2.5, 1.0, 2.0, 1.5])
    _, centroids = first_clusters(embeddings, THRESHOLD, MERGE_THRESHOLD, weights, SpeakerCount())
    assert len(centroids) == 2
    candidate = count_candidate(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids)
    assert candidate is not None and len(candidate.centroids) == 3
    assert candidate.stretch == [Region(30.0, 32.5), Region(40.0, 42.0)]
    a, b = candidate.nearest
    assert [r.start % 2 for r in a] == [0.0] * 4 and [r.start % 2 for r in b] == [1.0] * 4  # A's at even seconds
    assert all(r.end - r.start == 1.0 and r.start < 20 for r in a + b)
    assert a == sorted(a, key=lambda r: r.start) and b == sorted(b, key=lambda r: r.start)
    typical_a = np.argsort(-(embeddings[:10] @ embeddings[:10].sum(axis=0)))[:4]  # most like A's mean
    assert sorted(r.start for r in a) == sorted(2.0 * i for i in typical_a)


def test_the_count_step_ends_at_a_candidate_with_too_little_speech_to_check() -> None:
    embeddings, regions, weights = _check_case([0.6] * 4)  # 2.4 s < CHECK_MIN_S
    _, centroids = first_clusters(embeddings, THRESHOLD, MERGE_THRESHOLD, weights, SpeakerCount())
    assert count_candidate(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids) is None
    embeddings, regions, weights = _check_case([0.7] * 4)
    candidate = count_candidate(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids)
    assert candidate is not None and sum(r.end - r.start for r in candidate.stretch) == pytest.approx(2.8)


def _two_in_one(cosine: float) -> tuple[np.ndarray, list[Region], np.ndarray, np.ndarray]:
    """Voice A in 10 regions of 1 s, then voices C and D, ``cosine`` alike, in 6 each, alternating; the
    centroids given: A's, and one of C and D together."""
    rng = np.random.default_rng(3)
    a, c, other = voices(3, rng)
    d = toward(c, other, cosine)
    embeddings = np.concatenate([regions_of(a, 10, 0.1, rng), *[regions_of(v, 1, 0.1, rng) for v in [c, d] * 6]])
    regions = [Region(float(i), i + 1.0) for i in range(22)]
    centroids = np.stack([embeddings[:10].sum(axis=0), embeddings[10:].sum(axis=0)])
    return embeddings, regions, np.full(22, 2.0), centroids / np.linalg.norm(centroids, axis=1, keepdims=True)


def test_a_speaker_whose_halves_are_unlike_is_heard_in_two() -> None:
    # C and D (0.6 alike) given as one speaker: cut in two, their halves meet under SPLIT_SIMILARITY, so each
    # half's most typical 4 s are heard; A's halves are one voice's and are not.
    embeddings, regions, weights, centroids = _two_in_one(0.6)
    splits = split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids)
    assert [s.speaker for s in splits] == [1]
    halves = {tuple(int(r.start) % 2 for r in stretch) for stretch in splits[0].stretches}
    assert halves == {(0, 0, 0, 0), (1, 1, 1, 1)}  # C's regions start at even seconds, D's at odd
    assert all(s == sorted(s, key=lambda r: r.start) for s in splits[0].stretches)
    more = split(centroids, splits)
    assert more.shape == (3, DIM) and np.allclose(more[0], centroids[0])
    assert np.allclose(more[1:], splits[0].halves)  # the speaker's row is its first half, then the second
    assert sorted(np.argmax(embeddings[10:] @ more.T, axis=1)[:2].tolist()) == [1, 2]


def test_halves_more_alike_than_split_similarity_are_not_heard(monkeypatch) -> None:
    monkeypatch.setattr(diarize_module, "SPLIT_ALIKE", 1.01)  # the halves' gate alone
    embeddings, regions, weights, centroids = _two_in_one(0.85)
    assert split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids) == []


def _stray_part(stray_s: float, alike: float = 0.6) -> tuple[np.ndarray, list[Region], np.ndarray]:
    """Voices A and B in 10 regions of 1 s each (2 partials), then 4 regions of ``stray_s`` s each (2
    partials: enough to stay a cluster) of a voice ``alike`` A's (not B's): the clustering keeps it
    as a third speaker with little speech."""
    rng = np.random.default_rng(8)
    a, b, other = voices(3, rng)
    stray = toward(a, other, alike)
    embeddings = np.concatenate(
        [regions_of(a, 10, 0.1, rng), regions_of(b, 10, 0.1, rng), regions_of(stray, 4, 0.02, rng)]
    )
    regions = [Region(float(i), i + 1.0) for i in range(20)] + [
        Region(30.0 + 5 * i, 30.0 + 5 * i + stray_s) for i in range(4)
    ]
    return embeddings, regions, np.full(24, 2.0)


def test_a_speaker_with_little_speech_is_heard_against_its_nearest_speakers_and_merged(monkeypatch) -> None:
    monkeypatch.setattr(diarize_module, "MERGE_UNLIKE", -1.0)  # every nearest speaker alike enough to hear
    embeddings, regions, weights = _stray_part(1.5)
    _, centroids = first_clusters(embeddings, THRESHOLD, MERGE_THRESHOLD, weights, SpeakerCount())
    assert len(centroids) == 3
    labels = np.argmax(embeddings @ centroids.T, axis=1)
    a, b, stray = labels[0], labels[10], labels[20]
    (candidate,) = merge_candidates(embeddings, regions, centroids, weights)  # A's and B's 10 s are not heard
    assert candidate.speaker == stray
    assert sum(r.end - r.start for r in candidate.stretch) == pytest.approx(4.5)  # up to CHECK_MAX_S
    assert [j for j, _ in candidate.nearest] == [a, b]  # nearest first, each with its own typical 4 s
    assert all(sum(r.end - r.start for r in s) == 4.0 for _, s in candidate.nearest)
    assert all(r.start < 10 for r in candidate.nearest[0][1]) and all(
        10 <= r.start < 20 for r in candidate.nearest[1][1]
    )
    merged = merge_speakers(embeddings, centroids, candidate.speaker, a)
    assert len(merged) == 2
    assert np.all(np.argmax(embeddings[20:] @ merged.T, axis=1) == np.argmax(embeddings[0] @ merged.T))


def test_speakers_with_too_little_or_enough_speech_are_not_heard_for_a_merge() -> None:
    # The stray part 0.68 alike A's: alike enough to hear against A's (MERGE_UNLIKE), were it not for its speech.
    embeddings, regions, weights = _stray_part(0.6, alike=0.68)  # 2.4 s < CHECK_MIN_S: too little to hear
    _, centroids = first_clusters(embeddings, THRESHOLD, MERGE_THRESHOLD, weights, SpeakerCount())
    assert len(centroids) == 3 and merge_candidates(embeddings, regions, centroids, weights) == []
    embeddings, regions, weights = _stray_part(2.0, alike=0.68)  # 8 s: MERGE_UNDER_S, a speaker of its own
    assert merge_candidates(embeddings, regions, centroids, weights) == []


def test_a_merge_is_heard_only_against_speakers_alike_enough_to_be_its_voice() -> None:
    # The stray part 0.6 alike A's: its stretch meets A's and B's under MERGE_UNLIKE by GE2E, where CAM++
    # never heard one voice on the hard set, so it is not heard at all; 0.68 alike: heard against A's alone.
    embeddings, regions, weights = _stray_part(1.5, alike=0.6)
    _, centroids = first_clusters(embeddings, THRESHOLD, MERGE_THRESHOLD, weights, SpeakerCount())
    assert len(centroids) == 3 and merge_candidates(embeddings, regions, centroids, weights) == []
    embeddings, regions, weights = _stray_part(1.5, alike=0.68)
    _, centroids = first_clusters(embeddings, THRESHOLD, MERGE_THRESHOLD, weights, SpeakerCount())
    labels = np.argmax(embeddings @ centroids.T, axis=1)
    (candidate,) = merge_candidates(embeddings, regions, centroids, weights)
    assert candidate.speaker == labels[20] and [j for j, _ in candidate.nearest] == [labels[0]]
    stretches = (candidate.stretch, candidate.nearest[0][1])
    assert MERGE_UNLIKE <= likeness(stretches, embeddings, weights, regions) < 0.7


def _c_and_d_with_a_stray(alike: float) -> tuple[np.ndarray, list[Region], np.ndarray, np.ndarray]:
    """A in 10 regions, then C and D (``alike``) in turns as one speaker with one stray region of a voice 0.6
    alike C's: (embeddings, regions, weights, the two speakers' centroids)."""
    rng = np.random.default_rng(4)
    a, c, other, far = voices(4, rng)
    d = toward(c, other, alike)
    stray = toward(c, far, 0.6)
    embeddings = np.concatenate(
        [
            regions_of(a, 10, 0.05, rng),
            *[regions_of(v, 1, 0.05, rng) for v in [c, d] * 6],
            regions_of(stray, 1, 0.05, rng),
        ]
    )
    regions = [Region(float(i), i + 1.0) for i in range(23)]
    weights = np.full(23, 2.0)
    centroids = np.stack([embeddings[:10].sum(axis=0), embeddings[10:].sum(axis=0)])
    return embeddings, regions, weights, centroids / np.linalg.norm(centroids, axis=1, keepdims=True)


def test_a_speaker_whose_clustering_cut_splits_off_a_stray_region_is_cut_by_two_means() -> None:
    # C and D (0.78 alike) given as one speaker with one stray region of a voice 0.6 alike C's: the
    # clustering's cut at two puts the stray region alone (1 s: too little to hear), so the speaker is cut
    # by two-means, whose halves are C's and D's, meeting under TWO_MEANS_SIMILARITY (but over
    # SPLIT_SIMILARITY, the clustering's gate).
    embeddings, regions, weights, centroids = _c_and_d_with_a_stray(0.78)
    (candidate,) = split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids)
    assert candidate.speaker == 1
    halves = {tuple(int(r.start) % 2 for r in stretch) for stretch in candidate.stretches}
    assert halves == {(0, 0, 0, 0), (1, 1, 1, 1)}  # C's regions start at even seconds, D's at odd
    assert SPLIT_SIMILARITY <= float(candidate.halves[0] @ candidate.halves[1]) < TWO_MEANS_SIMILARITY


def test_a_split_whose_stretches_are_alike_is_not_heard(monkeypatch) -> None:
    # C and D 0.83 alike: the two-means halves meet under TWO_MEANS_SIMILARITY, but their stretches meet at
    # SPLIT_ALIKE or over by GE2E, where CAM++ heard one voice on every such split of the hard set.
    embeddings, regions, weights, centroids = _c_and_d_with_a_stray(0.83)
    assert split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids) == []
    monkeypatch.setattr(diarize_module, "SPLIT_ALIKE", 1.01)
    (candidate,) = split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids)
    assert float(candidate.halves[0] @ candidate.halves[1]) < TWO_MEANS_SIMILARITY
    assert likeness(candidate.stretches, embeddings, weights, regions) >= SPLIT_ALIKE


def test_a_splits_halves_are_redrawn_from_its_stretches() -> None:
    # C and D (0.6 alike) given as one speaker and cut into halves that mix them; each half's stretch is
    # one voice's most typical regions, so each region goes to its own voice's and the halves become C's
    # and D's centroids.
    embeddings, regions, weights, _ = _two_in_one(0.6)
    idx = np.arange(10, 22)
    mixed = np.stack([embeddings[10:16].sum(axis=0), embeddings[16:22].sum(axis=0)])
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    stretches = ([regions[i] for i in (10, 12, 14, 16)], [regions[i] for i in (11, 13, 15, 17)])
    halves = redraw(idx, stretches, mixed, embeddings, weights, regions)
    c = embeddings[10:22:2].sum(axis=0)
    d = embeddings[11:22:2].sum(axis=0)
    assert np.allclose(halves, np.stack([c / np.linalg.norm(c), d / np.linalg.norm(d)]))
    # C's regions, one stretch C's and the other A's: every region goes to the first, and the halves stay.
    one = ([regions[i] for i in (10, 12)], [regions[i] for i in (0, 1)])
    assert redraw(np.arange(10, 22, 2), one, mixed, embeddings, weights, regions) is mixed


def test_how_alike_a_splits_halves_sound_over_all_their_regions() -> None:
    # Each region heard alone, nearer its own voice's stretch: the two groups' vectors meet where the voices
    # do; every region nearer one stretch: one voice (1.0).
    _, regions, _, _ = _two_in_one(0.6)
    rng = np.random.default_rng(3)
    sound_c, sound_d = voices(2, rng)
    members = tuple(range(10, 22))
    candidate = SplitCandidate(1, np.zeros((2, DIM)), ([], []), members)
    heard = [regions_of(sound_c if i % 2 == 0 else sound_d, 1, 0.1, rng)[0] for i in members]
    sounds = sounds_apart(candidate, heard, (sound_c, sound_d), regions)
    assert sounds == pytest.approx(float(sound_c @ sound_d), abs=0.1)
    assert sounds < SPLIT_REGIONS_DIFFERENT
    same = [regions_of(sound_c, 1, 0.1, rng)[0] for _ in members]
    assert sounds_apart(candidate, same, (sound_c, sound_d), regions) == 1.0


def test_a_long_speakers_regions_heard_for_a_split_are_about_a_minute_from_all_over() -> None:
    # C and D alternating over 200 regions of 1 s (the test above's voices, 0.6 alike): the split's regions
    # to hear alone are every 4th, 50 s from the first region to the last, not 200 s.
    rng = np.random.default_rng(4)
    a, c, other = voices(3, rng)
    d = toward(c, other, 0.6)
    embeddings = np.concatenate([regions_of(a, 10, 0.1, rng), *[regions_of(v, 1, 0.1, rng) for v in [c, d] * 100]])
    regions = [Region(float(i), i + 1.0) for i in range(210)]
    centroids = np.stack([embeddings[:10].sum(axis=0), embeddings[10:].sum(axis=0)])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    (candidate,) = split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, np.full(210, 2.0), centroids)
    assert candidate.members == tuple(range(10, 210, 4))
    assert sum(regions[i].end - regions[i].start for i in candidate.members) <= SPLIT_REGIONS_MAX_S
    embeddings, regions, weights, centroids = _two_in_one(0.6)
    (whole,) = split_candidates(embeddings, regions, THRESHOLD, MERGE_THRESHOLD, weights, centroids)
    assert whole.members == tuple(range(10, 22))  # 12 s: every region
