"""The two jobs the API process runs on its audio preprocessing pool. Top-level functions of plain
data, so they run in a thread pool or a process pool alike."""

from __future__ import annotations

import numpy as np

from voxlane.audio.decode import TARGET_RATE, decode_audio
from voxlane.audio.features import log_mel
from voxlane.audio.split import split_windows
from voxlane.audio.vad import VadOptions, speech_spans, speech_windows, window_speech

Speech = list[tuple[float, float]]
"""Stretches of a window (in seconds of the upload) that hold speech: the engine continues a decode that
stopped early only where speech is left, and drops what Whisper reads in a window with none when Whisper
too doubts there is speech ("Thank you." over room noise)."""


def decode_and_split(
    data: bytes, max_duration_s: float, search_s: float, vad: VadOptions | None = None
) -> tuple[np.ndarray, list[tuple[int, int, Speech | None]]]:
    """Upload bytes -> (16 kHz mono samples, [(start, end, speech) of each window of at most 30 s]).

    With ``vad``, the windows cover the speech Silero VAD finds in the whole upload (none for audio without
    speech), and ``speech`` is what it found in each. Without, they cover all of the audio and ``speech``
    is None: :func:`window_features` finds it, window by window, more cheaply."""
    audio = decode_audio(data, max_duration_s)
    if vad is None:
        windows = split_windows(audio.samples, TARGET_RATE, search_s=search_s)
        return audio.samples, [(w.start, w.end, None) for w in windows]
    spans = speech_spans(audio.samples, vad)
    windows = speech_windows(audio.samples, vad, search_s, spans=spans)
    return audio.samples, [(w.start, w.end, _speech_in(w.start, w.end, spans)) for w in windows]


def _speech_in(start: int, end: int, spans: list[tuple[int, int]]) -> list[tuple[float, float]]:
    return [(max(start, a) / TARGET_RATE, min(end, b) / TARGET_RATE) for a, b in spans if a < end and b > start]


def window_features(
    samples: np.ndarray, n_mels: int, offset_s: float = 0.0, speech: Speech | None = None
) -> tuple[np.ndarray, int, Speech]:
    """One window's log-mel features (padded to 30 s), how many frames hold audio, and its speech: ``speech``
    when the split found it, else found here (vad.window_speech: energy, or Silero when that finds little)."""
    features, n_frames = log_mel(samples, n_mels)
    if speech is None:
        speech = window_speech(samples, features, n_frames, offset_s)
    return features, n_frames, speech


def warm_up() -> None:
    """Load the VAD model in this worker now, so that the first request does not wait for it."""
    speech_spans(np.zeros(TARGET_RATE, dtype=np.float32))
