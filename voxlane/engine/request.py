"""Engine-internal state. Not sent over the wire (see messages.py) and not HTTP (see protocol.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from voxlane.audio.features import FRAMES_PER_SECOND, pad_frames
from voxlane.messages import Segment, TranscribeOptions, WindowRequest


@dataclass(eq=False)
class WindowWork:
    """One window waiting for, or in, a batch: a request's window, or the continuation of one."""

    msg: WindowRequest
    features: np.ndarray
    arrival_s: float
    """When the window's request was first seen by the engine."""
    enqueued_s: float
    """When this window entered the queue (batch wait is measured from here)."""
    seq: int = 0
    queued: bool = True
    """False once the window left the queue (taken into a batch, or aborted)."""
    passes: int = 0
    """Passes over this window that ran before this one (0: the window's first decode)."""
    earlier: list[Segment] = field(default_factory=list)
    """Segments the earlier passes decoded; the window's result is these plus this pass's."""

    @property
    def request_id(self) -> str:
        return self.msg.request_id

    @property
    def options(self) -> TranscribeOptions:
        return self.msg.options

    def continuation(self, resume_s: float, segments: list[Segment]) -> WindowWork:
        """The rest of this window from ``resume_s`` (seconds into it) on, as a new pass: the features
        shifted left and padded as a short window is, offset and duration moved on by the same amount,
        so the continuation's timestamps land at their true place in the original audio."""
        shift = int(round(resume_s * FRAMES_PER_SECOND))
        if not 0 < shift < self.msg.n_frames:
            raise ValueError(f"a continuation must start inside the window's audio, not at {resume_s:.2f} s")
        features = pad_frames(self.features[:, shift:self.msg.n_frames], self.features.shape[1],
                              float(self.features.max()))
        shift_s = shift / FRAMES_PER_SECOND
        msg = WindowRequest(
            self.msg.request_id, self.msg.index, self.msg.count, round(self.msg.offset_s + shift_s, 6),
            max(0.0, self.msg.duration_s - shift_s), self.msg.n_frames - shift, self.msg.n_mels, self.msg.options,
            self.msg.speech,
        )
        return WindowWork(msg, features, arrival_s=self.arrival_s, enqueued_s=self.enqueued_s,
                          passes=self.passes + 1, earlier=self.earlier + segments)


@dataclass
class RequestState:
    request_id: str
    arrival_s: float
    window_count: int
    emitted: int = 0
