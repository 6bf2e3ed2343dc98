"""The two jobs the API process runs on its audio preprocessing pool. Top-level functions of plain
data, so they run in a thread pool or a process pool alike."""

from __future__ import annotations

import numpy as np

from voxlane.audio.decode import TARGET_RATE, decode_audio
from voxlane.audio.features import log_mel
from voxlane.audio.split import split_windows
from voxlane.audio.vad import VadOptions, speech_spans, speech_windows


def decode_and_split(data: bytes, max_duration_s: float, search_s: float,
                     vad: VadOptions | None = None) -> tuple[np.ndarray, list[tuple[int, int, list[tuple[float, float]]]]]:
    """Upload bytes -> (16 kHz mono samples, [(start, end, speech) of each window of at most 30 s]).

    With ``vad``, the windows cover the speech Silero VAD finds (none for audio without speech); without,
    they cover all of the audio. Either way ``speech`` lists the stretches of the window (in seconds of the
    audio) that Silero VAD scored as speech: the engine continues a decode that stopped early only where
    speech is left, and drops what Whisper reads in a window with none when Whisper too doubts there is
    speech ("Thank you." over room noise)."""
    audio = decode_audio(data, max_duration_s)
    spans = speech_spans(audio.samples, vad or VadOptions())
    if vad is not None:
        windows = speech_windows(audio.samples, vad, search_s, spans=spans)
    else:
        windows = split_windows(audio.samples, TARGET_RATE, search_s=search_s)
    return audio.samples, [(w.start, w.end, _speech_in(w.start, w.end, spans)) for w in windows]


def _speech_in(start: int, end: int, spans: list[tuple[int, int]]) -> list[tuple[float, float]]:
    return [(max(start, a) / TARGET_RATE, min(end, b) / TARGET_RATE) for a, b in spans if a < end and b > start]


def window_features(samples: np.ndarray, n_mels: int) -> tuple[np.ndarray, int]:
    """One window's log-mel features, padded to 30 s, and how many frames hold audio."""
    return log_mel(samples, n_mels)


def warm_up() -> None:
    """Load the VAD model in this worker now, so that the first request does not wait for it."""
    speech_spans(np.zeros(TARGET_RATE, dtype=np.float32))
