"""The two jobs the API process runs on its audio preprocessing pool. Top-level functions of plain
data, so they run in a thread pool or a process pool alike.

What an upload costs the API process: the decode hands on 16 kHz int16 a block at a time, the
blocks are cut into 30 s windows as they come, and a window without sound (:func:`split.is_silent`) is
dropped there: it is not kept, not sent to the engine and yields no text, so hours of digital or near
silence cost next to nothing. A window with sound is kept as int16 (2 bytes a sample) until its log-mel
features are computed (:func:`window_features`, float32 for that window only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from voxlane.audio.decode import TARGET_RATE, DecodedInfo, decode_steps, to_float
from voxlane.audio.features import log_mel_and_power
from voxlane.audio.split import Window, WindowCutter, is_silent
from voxlane.audio.vad import WINDOW_S, VadOptions, speech_spans, speech_windows, window_speech

Speech = list[tuple[float, float]]
"""Stretches of a window (in seconds of the upload) that hold speech: the engine continues a decode that
stopped early only where speech is left, and drops what Whisper reads in a window with none when Whisper
too doubts there is speech ("Thank you." over room noise)."""


class OverBudget(Exception):
    """The upload's audio with sound in it passed the caller's ``budget_s`` before the decode ended (the
    server answers 429: its queue cannot take that much now)."""

    def __init__(self, kept_s: float) -> None:
        super().__init__(kept_s)
        self.kept_s = kept_s


@dataclass
class AudioWindow:
    """One window of at most 30 s to transcribe."""

    start: int
    """First sample, in the upload at 16 kHz."""
    end: int
    """One past the last sample."""
    pcm: np.ndarray
    """Its samples: mono int16 at 16 kHz."""
    speech: Speech | None
    """What VAD found in it, when the upload was chunked by VAD; else None (found by window_features)."""
    block_offset: int | None = None
    """Where its samples start in the upload's block of shared memory (``SplitAudio.block``; ``pcm`` is
    then empty: audio/shared.py); None when ``pcm`` holds them."""

    @property
    def offset_s(self) -> float:
        return self.start / TARGET_RATE

    @property
    def duration_s(self) -> float:
        return (self.end - self.start) / TARGET_RATE


@dataclass(frozen=True)
class SplitAudio:
    """An upload, decoded and cut: its windows with sound, in order."""

    n_samples: int
    """All of the audio, at 16 kHz."""
    windows: list[AudioWindow]
    silent_s: float
    """Seconds of audio left out as silent."""
    block: str | None = None
    """The block of shared memory that holds the windows' samples (audio/shared.py), or None."""

    @property
    def duration_s(self) -> float:
        return self.n_samples / TARGET_RATE


STEP_S = 300.0
"""Seconds of audio one :meth:`SplitSteps.step` decodes (0.1 to 0.3 s of a core for FLAC): a long upload's
decode takes turns on the audio pool with other requests' jobs, so a short clip does not wait behind hours
of audio."""


class SplitSteps:
    """:func:`decode_and_split` a step at a time. One request's; the steps may run on any thread, in turn."""

    def __init__(self, data: bytes, max_duration_s: float, search_s: float, vad: VadOptions | None = None) -> None:
        self.search_s = search_s
        self.vad = vad
        self.budget_s = math.inf
        self._cutter = WindowCutter(TARGET_RATE, search_s=search_s)
        self._kept: list[AudioWindow] = []
        self._silent = 0
        self._sound = 0
        self._decoded_s = 0.0
        self._steps = decode_steps(data, max_duration_s, lambda block: self._take(self._cutter.feed(block)))

    def step(self, budget_s: float = math.inf, step_s: float = STEP_S) -> SplitAudio | None:
        """Decode about ``step_s`` more seconds of audio: None while there is more, then the result. Raises
        OverBudget once the audio with sound passes ``budget_s`` (the queue's room now)."""
        self.budget_s = budget_s
        self._check_budget()
        until = self._decoded_s + step_s
        try:
            while self._decoded_s < until:
                self._decoded_s = next(self._steps)
            return None
        except StopIteration as done:
            info: DecodedInfo = done.value
        self._take(self._cutter.finish())
        kept = self._kept if self.vad is None else _speech_windows(self._kept, info.n_samples, self.vad, self.search_s)
        return SplitAudio(info.n_samples, kept, self._silent / TARGET_RATE)

    def _take(self, cut: list[tuple[Window, np.ndarray]]) -> None:
        for window, pcm in cut:
            if is_silent(pcm):
                self._silent += window.length
                continue
            self._kept.append(AudioWindow(window.start, window.end, pcm, None))
            self._sound += window.length
            self._check_budget()

    def _check_budget(self) -> None:
        if self._sound > self.budget_s * TARGET_RATE:
            raise OverBudget(self._sound / TARGET_RATE)


def decode_and_split(
    data: bytes, max_duration_s: float, search_s: float, vad: VadOptions | None = None, budget_s: float = math.inf
) -> SplitAudio:
    """Upload bytes -> its windows of at most 30 s that hold sound.

    Without ``vad``, the windows cover all of the audio but its silent windows, cut at the quietest 100 ms
    of the ``search_s`` before each 30 s boundary (split_windows), and their speech is left for
    :func:`window_features` to find, window by window, more cheaply. With ``vad``, they cover the speech
    Silero VAD finds in each stretch of windows with sound (none for audio without speech), and ``speech``
    is what it found in each. Raises OverBudget as soon as the audio with sound passes ``budget_s``
    seconds, and what decode_stream raises (UnsupportedAudio, PayloadTooLarge)."""
    steps = SplitSteps(data, max_duration_s, search_s, vad)
    while True:
        audio = steps.step(budget_s, math.inf)
        if audio is not None:
            return audio


def _speech_windows(kept: list[AudioWindow], n_samples: int, vad: VadOptions, search_s: float) -> list[AudioWindow]:
    """VAD windows of each run of adjacent windows with sound (a silent window between two runs is a pause
    of 22 s or more, longer than any that VAD windows bridge)."""
    runs: list[list[AudioWindow]] = []
    for window in kept:
        if runs and runs[-1][-1].end == window.start:
            runs[-1].append(window)
        else:
            runs.append([window])
    out: list[AudioWindow] = []
    for run in runs:
        start = run[0].start
        pcm = np.concatenate([w.pcm for w in run]) if len(run) > 1 else run[0].pcm
        spans = speech_spans(pcm, vad)
        whole = n_samples <= WINDOW_S * TARGET_RATE
        for w in speech_windows(pcm, vad, search_s, spans=spans, whole_if_short=whole):
            speech = _speech_in(w.start, w.end, spans, start)
            out.append(AudioWindow(start + w.start, start + w.end, pcm[w.start : w.end], speech))
    return out


def _speech_in(start: int, end: int, spans: list[tuple[int, int]], offset: int) -> Speech:
    return [
        ((offset + max(start, a)) / TARGET_RATE, (offset + min(end, b)) / TARGET_RATE)
        for a, b in spans
        if a < end and b > start
    ]


def window_features(
    pcm: np.ndarray, n_mels: int, offset_s: float = 0.0, speech: Speech | None = None
) -> tuple[np.ndarray, int, Speech]:
    """One window's log-mel features (padded to 30 s), how many frames hold audio, and its speech: ``speech``
    when the split found it, else found here (vad.window_speech: energy, or Silero when that finds little).
    ``pcm`` is int16 (float32 is read as it is)."""
    features, n_frames, speech, _ = window_features_and_power(pcm, n_mels, offset_s, speech)
    return features, n_frames, speech


def window_features_and_power(
    pcm: np.ndarray, n_mels: int, offset_s: float = 0.0, speech: Speech | None = None
) -> tuple[np.ndarray, int, Speech, np.ndarray]:
    """:func:`window_features` and the power spectrum of its log-mel (features.log_mel_and_power)."""
    samples = to_float(pcm) if pcm.dtype == np.int16 else pcm
    features, n_frames, power = log_mel_and_power(samples, n_mels)
    if speech is None:
        speech = window_speech(samples, features, n_frames, offset_s)
    return features, n_frames, speech, power


def warm_up() -> None:
    """Load the VAD model in this worker now, so that the first request does not wait for it."""
    speech_spans(np.zeros(TARGET_RATE, dtype=np.float32))
