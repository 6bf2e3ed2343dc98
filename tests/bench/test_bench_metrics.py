"""The benchmark's figures on constructed timings with known answers."""

from __future__ import annotations

import math

import pytest

from voxlane.bench import metrics
from voxlane.bench.wer import basic_normaliser, score, text_normaliser, total, word_error_rate


def test_rtfx_is_audio_seconds_over_wall_seconds() -> None:
    assert metrics.rtfx(120.0, 10.0) == 12.0
    assert math.isnan(metrics.rtfx(5.0, 0.0))


def test_percentiles_interpolate_between_ranks() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert metrics.percentile(values, 50) == pytest.approx(5.5)
    assert metrics.percentile(values, 90) == pytest.approx(9.1)
    assert metrics.percentile(values, 99) == pytest.approx(9.91)
    assert metrics.percentile(values, 100) == 10.0
    assert math.isnan(metrics.percentile([], 50))


def test_latency_stats_are_in_milliseconds() -> None:
    stats = metrics.latency_stats([0.1, 0.2, 0.3, 0.4])
    assert stats["mean"] == pytest.approx(250.0)
    assert stats["median"] == pytest.approx(250.0)
    assert stats["max"] == pytest.approx(400.0)
    assert stats["std"] == pytest.approx(111.8034, rel=1e-4)  # population std
    assert stats["p99"] == pytest.approx(397.0)
    assert all(math.isnan(v) for v in metrics.latency_stats([]).values())


def test_inter_chunk_gaps() -> None:
    assert metrics.inter_chunk_s([1.0, 1.5, 3.0]) == pytest.approx([0.5, 1.5])
    assert metrics.inter_chunk_s([1.0]) == []


def _paced(speed: float, chunk_s: float = 0.1, n: int = 20) -> list[tuple[float, float]]:
    """A stream producing ``speed`` audio seconds per wall second, in chunks of ``chunk_s``."""
    return [(10.0 + k * chunk_s / speed, chunk_s) for k in range(n)]


def test_stream_at_half_real_time_stalls_at_every_chunk() -> None:
    play = metrics.simulate_playback(_paced(0.5))
    # chunk k arrives at 0.2k; the buffer runs dry at 0.2(k-1) + 0.1: each of the 19 later chunks is 0.1 s late
    assert play.underruns == 19
    assert play.max_stall_s == pytest.approx(0.1)
    assert play.total_stall_s == pytest.approx(1.9)


def test_stream_at_twice_real_time_never_stalls() -> None:
    play = metrics.simulate_playback(_paced(2.0))
    assert play == metrics.Continuity(0, 0.0, 0.0)


def test_one_late_chunk_is_one_stall_of_its_lateness() -> None:
    # 1 s buffered at t=0; the next chunk comes at t=1.5: a 0.5 s stall, then playback resumes
    chunks = [(0.0, 1.0), (1.5, 1.0), (2.0, 1.0)]
    play = metrics.simulate_playback(chunks)
    assert (play.underruns, play.total_stall_s, play.max_stall_s) == (1, pytest.approx(0.5), pytest.approx(0.5))


def test_playback_ignores_chunks_without_audio() -> None:
    assert metrics.simulate_playback([(0.0, 0.0), (5.0, 1.0), (5.5, 1.0)]).underruns == 0


def test_wer_uses_the_normaliser_and_skips_empty_references() -> None:
    norm = basic_normaliser
    wer, n = word_error_rate(
        ["Hello, World!", "", "one two three four"], ["hello world", "anything", "one two tree four"], norm
    )
    assert n == 2
    assert wer == pytest.approx(1 / 6)  # one substitution over six reference words
    wer, _ = word_error_rate(["a b"], [""], norm)
    assert wer == 1.0


def test_basic_normaliser() -> None:
    assert basic_normaliser("  Café, I'm 'here' — OK?  ") == "cafe i'm here ok"


def test_whisper_normaliser_is_used_when_installed() -> None:
    name, normalise = text_normaliser()
    assert "EnglishTextNormalizer" in name
    assert normalise("Mr. Smith isn't here") == "mister smith is not here"


def test_corpus_wer_sums_the_pairs_as_jiwer_does_over_lists() -> None:
    import jiwer

    refs = ["the cat sat on the mat", "a b c d", "one two"]
    hyps = ["the cat sat on mat", "a x c d e", ""]
    summed, counted = total(refs, hyps, basic_normaliser)
    assert counted == 3 and (summed.words, summed.sub, summed.dels, summed.ins) == (12, 1, 3, 1)
    assert summed.wer == pytest.approx(jiwer.wer(refs, hyps))


def test_an_empty_reference_counts_what_was_output_as_insertions() -> None:
    s = score("", "uh hello", basic_normaliser)
    assert (s.words, s.ins, s.output_words) == (0, 2, 2)
