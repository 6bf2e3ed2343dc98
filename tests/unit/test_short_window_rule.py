"""Which windows are encoded short (``--short-window-pad-s``): the first pass of a transcription's window with
at most SHORT_MAX_S of audio and no prompt; never live work or a continuation; nothing when the pad is 0."""

from __future__ import annotations

import numpy as np

from voxlane.audio.features import N_FRAMES
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import SHORT_MAX_S, WindowPass, is_short

PAD = 500


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


def test_live_work_is_never_short() -> None:
    assert not is_short(window(3.0, deadline_s=0.1), PAD)  # a turn's final: it looped when encoded short
    assert not is_short(window(3.0, deadline_s=0.5, partial=True), PAD)  # cut to its audio already


def test_no_short_windows_without_a_pad_nor_for_continuations_or_prompts() -> None:
    assert not is_short(window(3.0), 0)
    prompted = window(3.0)
    prompted.msg.options = TranscribeOptions(prompt="Montreal Forced Aligner")
    assert not is_short(prompted, PAD)
    continuation = window(3.0)
    continuation.passes = 1
    assert not is_short(continuation, PAD)
