"""A continuation pass: where it starts, what it carries, and when the runner asks for one."""

from __future__ import annotations

import numpy as np
import pytest

from voxlane.audio.features import log_mel
from voxlane.engine.request import WindowWork
from voxlane.messages import Segment, TranscribeOptions, WindowRequest, Word
from voxlane.runners.whisper_segments import MAX_PASSES, PlacedWord, cut_at_skipped_speech, speech_after


def window(offset_s: float, samples: np.ndarray, speech: list[tuple[float, float]] | None = None) -> WindowWork:
    features, n_frames = log_mel(samples)
    options = TranscribeOptions(language="en", prompt="Voxlane")
    msg = WindowRequest(
        "r", 2, 5, offset_s, len(samples) / 16000, n_frames, 80, options, speech, model="/models/whisper-base"
    )
    return WindowWork(msg, features, arrival_s=1.0, enqueued_s=1.0)


def test_a_continuation_is_the_rest_of_the_window_at_its_true_offset() -> None:
    rng = np.random.default_rng(0)
    samples = (rng.standard_normal(16000 * 20) * 0.1).astype(np.float32)
    work = window(60.0, samples, [(61.0, 79.0)])
    earlier = [Segment(60.0, 68.0, " before", [1], 0.0, 1.0, 0.0, 0.0)]
    cont = work.continuation(8.0, earlier)

    assert (cont.msg.request_id, cont.msg.index, cont.msg.count) == ("r", 2, 5)
    assert cont.msg.offset_s == 68.0 and cont.msg.duration_s == pytest.approx(12.0)
    assert cont.msg.n_frames == work.msg.n_frames - 800
    assert cont.passes == 1 and cont.earlier == earlier and cont.msg.speech == [(61.0, 79.0)]
    assert cont.arrival_s == work.arrival_s  # keeps its request's place in the fair order
    # Decoded by the same model with the same options (a continuation of the default model's window once
    # lost its model, and the engine found no runner for it).
    assert cont.msg.model == "/models/whisper-base" and cont.msg.options == work.msg.options
    assert isinstance(cont, WindowWork) and cont.queued and cont.seq == 0  # queued afresh by the scheduler
    # The features are the window's, shifted by 8 s, padded at the end like a short window.
    np.testing.assert_array_equal(cont.features[:, : cont.msg.n_frames], work.features[:, 800 : work.msg.n_frames])
    floor = work.features.max() - 2.0
    np.testing.assert_allclose(cont.features[:, cont.msg.n_frames :], floor)
    assert cont.features.shape == work.features.shape
    # Its features equal those of the same audio cut there (up to frames at the cut and the window's peak).
    fresh, _ = log_mel(samples[8 * 16000 :])
    assert np.abs(fresh[:, 2:1000] - cont.features[:, 2:1000]).max() < 0.05


def test_a_continuation_must_start_inside_the_audio() -> None:
    work = window(0.0, np.zeros(16000 * 5, dtype=np.float32))
    with pytest.raises(ValueError):
        work.continuation(5.5, [])
    with pytest.raises(ValueError):
        work.continuation(0.0, [])


def test_speech_after_counts_vad_speech_left_in_the_window() -> None:
    samples = np.zeros(16000 * 30, dtype=np.float32)
    assert speech_after(window(100.0, samples, [(101.0, 110.0), (124.0, 126.5)]).msg, 20.0)  # 2.5 s left
    assert not speech_after(window(100.0, samples, [(101.0, 120.6)]).msg, 20.0)  # 0.6 s: padding, not words
    assert not speech_after(window(100.0, samples, []).msg, 5.0)
    assert speech_after(window(100.0, samples, None).msg, 5.0)  # no VAD ran: trust the decode's stop


def _segment(start: float, end: float, words: list[tuple[str, float, float]], tokens_per_word: int = 2) -> Segment:
    seg = Segment(
        start, end, "".join(w for w, _, _ in words), list(range(len(words) * tokens_per_word)), 0.0, 1.0, 0.0, 0.0
    )
    seg.words = [Word(w, a, b, 0.9) for w, a, b in words]
    return seg


def _placed(segments: list[Segment], tokens_per_word: int = 2) -> list[PlacedWord]:
    return [
        PlacedWord(k, i + 1, (i + 1) * tokens_per_word, w)
        for k, seg in enumerate(segments)
        for i, w in enumerate(seg.words or [])
    ]


def test_words_that_skip_speech_inside_their_segment_are_cut_there() -> None:
    # The segment claims 0-20 s, its words end at 3.6 s, and VAD hears 12 s of speech after them: the
    # decode skipped it. The continuation starts at the last word's end; the next segment is read again.
    work = window(100.0, np.zeros(16000 * 22, dtype=np.float32), [(100.0, 103.6), (104.8, 117.0), (120.0, 122.0)])
    segments = [
        _segment(100.0, 120.1, [(" Certainly,", 100.0, 100.9), (" be", 101.7, 102.0), (" specific.", 102.5, 103.6)]),
        _segment(120.1, 122.0, [(" Allow", 120.1, 120.5), (" opinions.", 120.5, 121.2)]),
    ]
    assert cut_at_skipped_speech(work, segments, _placed(segments)) == pytest.approx(3.6)
    assert len(segments) == 1 and segments[0].end == 103.6
    assert segments[0].text == " Certainly, be specific." and len(segments[0].words or []) == 3


def test_a_skip_between_words_of_one_segment_cuts_the_segment_at_the_word_before_it() -> None:
    work = window(0.0, np.zeros(16000 * 30, dtype=np.float32), [(0.0, 2.2), (3.0, 7.5), (8.0, 9.2)])
    segments = [
        _segment(0.0, 9.0, [(" one", 0.0, 1.0), (" two", 1.0, 2.0), (" nine", 8.0, 9.0)]),
        _segment(9.0, 10.0, [(" ten", 9.0, 10.0)]),
    ]
    assert cut_at_skipped_speech(work, segments, _placed(segments)) == pytest.approx(2.0)
    assert [s.text for s in segments] == [" one two"]
    assert segments[0].tokens == [0, 1, 2, 3] and segments[0].end == 2.0


@pytest.mark.parametrize(
    ("speech", "passes"),
    [
        ([(0.0, 2.2), (7.7, 9.2)], 0),  # a pause between the words: 0.5 s of padding, no word skipped
        ([(0.0, 2.2), (4.0, 5.2), (7.7, 9.2)], 0),  # 1.7 s: one short sound and the padding, no words
        (None, 0),  # VAD did not run: nothing says the pause holds speech
        ([(0.0, 9.2)], MAX_PASSES - 1),  # the window's last pass: no continuation left to read it
    ],
)
def test_words_that_skip_no_speech_are_left_whole(speech: list[tuple[float, float]] | None, passes: int) -> None:
    work = window(0.0, np.zeros(16000 * 30, dtype=np.float32), speech)
    work.passes = passes
    segments = [_segment(0.0, 9.0, [(" one", 0.0, 1.0), (" two", 1.0, 2.0), (" nine", 8.0, 9.0)])]
    assert cut_at_skipped_speech(work, segments, _placed(segments)) is None
    assert segments[0].text == " one two nine" and segments[0].end == 9.0
