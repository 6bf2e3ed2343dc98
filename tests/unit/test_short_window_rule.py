"""Which windows are encoded short (``--short-window-pad-s``, and ``--short-final-pad-s`` for a live turn's
final): the first pass of a window with at most SHORT_MAX_S of audio and no prompt; never a live partial, a
continuation or a final the runner reads again on 30 s; nothing when the pad is 0."""

from __future__ import annotations

import numpy as np

from voxlane.audio.features import N_FRAMES
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import SHORT_MAX_S, WindowPass, is_short

PAD = 500
FINAL_PAD = 1000


def window(seconds: float, deadline_s: float | None = None, partial: bool = False) -> WindowPass:
    n_frames = round(seconds * 100)
    msg = WindowRequest(
        "r", 0, 1, 0.0, seconds, n_frames, 80, TranscribeOptions(), deadline_s=deadline_s, partial=partial
    )
    return WindowPass(msg, np.zeros((80, N_FRAMES), dtype=np.float32))


def test_windows_of_at_most_8_s_are_short() -> None:
    assert SHORT_MAX_S == 8.0
    assert is_short(window(1.9), PAD)
    assert is_short(window(8.0), PAD)
    assert not is_short(window(8.1), PAD)  # 10 s read worse short than in 30 s (docs/asr-engine.md)
    assert not is_short(window(29.0), PAD)


def test_a_live_final_is_short_with_its_own_pad_and_a_partial_never() -> None:
    final = window(3.0, deadline_s=0.1)
    assert is_short(final, PAD, FINAL_PAD)
    assert not is_short(final, PAD, 0)  # --short-final-pad-s 0: finals take 30 s
    assert not is_short(window(3.0), 0, FINAL_PAD)  # and the finals' pad is not the batch windows'
    assert not is_short(window(8.1, deadline_s=0.1), PAD, FINAL_PAD)  # the context counts in the 8 s
    final.beam_size = 1
    whole = final.read_whole()  # the runner reads it again on 30 s: its short read looped
    assert not is_short(whole, PAD, FINAL_PAD)
    assert is_short(final, PAD, FINAL_PAD)  # the pass it was copied from is left as it was
    assert whole.msg is final.msg and whole.features is final.features and whole.beam_size == 1
    assert not is_short(window(3.0, deadline_s=0.5, partial=True), PAD, FINAL_PAD)  # cut to its audio already


def test_no_short_windows_without_a_pad_nor_for_continuations_or_prompts() -> None:
    assert not is_short(window(3.0), 0)
    prompted = window(3.0)
    prompted.msg.options = TranscribeOptions(prompt="Montreal Forced Aligner")
    assert not is_short(prompted, PAD)
    continuation = window(3.0)
    continuation.passes = 1
    assert not is_short(continuation, PAD)
