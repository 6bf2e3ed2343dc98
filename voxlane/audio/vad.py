"""Voice activity detection with Silero VAD, and windows packed from the speech it finds.

The model is the ONNX file that ships inside the installed faster-whisper package (no download); it is
found without importing faster-whisper, whose import would pull CTranslate2 into this process. Silero
scores each 32 ms frame (512 samples, with the 64 samples before it as context) with a speech probability.
Speech starts where the probability reaches ``threshold`` and ends once it has stayed under
``threshold - 0.15`` for ``silence_duration_ms``; each span is widened by ``prefix_padding_ms`` on both
sides (at most half the gap to its neighbour), as OpenAI's ``server_vad`` options read.

Per window (:func:`window_speech`, what the engine's continuation and silence rules read when the upload
is not chunked by VAD): a cheap energy test on the window's log-mel first, Silero only when it finds too
little (see ENERGY_*).

Windows (:func:`speech_windows`): spans closer than ``MAX_GAP_S`` are joined into regions (pauses
included, so speech that Silero scored low between two spans is still decoded), and each region is cut
into windows of at most 30 s at the last pause before each 30 s limit (the middle of the gap between two
spans), or where there is none in the last ``search_s`` seconds, at the quietest 100 ms, as
``split_windows`` cuts any long audio. Audio
outside the regions (silence or noise of MAX_GAP_S or more) is not decoded, so a long pause cannot be
filled with invented words, and audio with no speech yields no text. Each window keeps its true offset in
the original audio, so timestamps need no mapping.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from voxlane.audio.split import Window, quietest_point

SAMPLE_RATE = 16000
FRAME = 512  # samples per Silero frame at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous frame each frame sees
RUN_FRAMES = 4096  # frames per model call (131 s of audio, 9 MiB of input)
MAX_GAP_S = 4.0
"""Silence longer than this between two speech spans always starts a new window."""
WINDOW_S = 30.0
ENERGY_RISE = 0.375
"""A log-mel frame counts as speech by energy when its mean level is this far (in normalised log-mel
units; 0.375 is 15 dB) above the window's floor, the 10th percentile of its frames."""
ENERGY_ENOUGH_S = 1.0
"""A window whose frames hold at least this much speech by energy is not run through Silero. Below it
(noise or silence with no louder moments, speech too flat for the test, clips under a few seconds), Silero
decides. On the dev set the energy test and Silero agreed on every continuation decision: the tails that
held a lost sentence had 2.1-5.3 s of speech by energy (2.5-4.3 s by Silero), the others 0-0.54 s
(0-0.53 s); pink noise at -40 and -60 dBFS had none. Silero costs 4x the log-mel features (2.1 s per
1,105 s of audio on one core); the energy test reads features that are already there."""
FRAMES_PER_S = 100  # log-mel frames per second


@dataclass(frozen=True)
class VadOptions:
    """OpenAI's ``server_vad`` chunking options (``auto`` uses these defaults)."""

    threshold: float = 0.5
    """Speech probability (0-1) at which speech starts."""
    prefix_padding_ms: int = 300
    """Audio kept before (and after) each speech span."""
    silence_duration_ms: int = 200
    """Silence that ends a speech span."""


def model_path() -> Path:
    spec = importlib.util.find_spec("faster_whisper")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "VAD needs the faster-whisper package (it ships the Silero VAD model): pip install faster-whisper"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / "silero_vad_v6.onnx"
    if not path.is_file():
        raise RuntimeError(f"the Silero VAD model is missing from the faster-whisper package ({path})")
    return path


class _Silero:
    def __init__(self) -> None:
        import onnxruntime

        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1  # each audio pool worker runs its own call
        opts.enable_cpu_mem_arena = False
        opts.log_severity_level = 4
        self.session = onnxruntime.InferenceSession(
            str(model_path()), providers=["CPUExecutionProvider"], sess_options=opts
        )

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        """Speech probability of each 512-sample frame of 16 kHz audio (float32, or int16 read as /32768; the
        last frame zero-padded). The frames are built RUN_FRAMES at a time, so long audio costs one run."""
        n = -(-len(samples) // FRAME)
        scale = 1.0 / 32768.0 if samples.dtype == np.int16 else 1.0
        h = c = np.zeros((1, 1, 128), dtype=np.float32)
        out = []
        for i in range(0, n, RUN_FRAMES):  # the LSTM state carries over from one run to the next
            k = min(RUN_FRAMES, n - i)
            first = i * FRAME - CONTEXT  # each frame sees the CONTEXT samples before it (zeros before the start)
            flat = np.zeros(CONTEXT + k * FRAME, dtype=np.float32)
            src = samples[max(first, 0) : (i + k) * FRAME]
            flat[max(first, 0) - first : max(first, 0) - first + len(src)] = src
            if scale != 1.0:
                flat *= scale
            frames = np.lib.stride_tricks.sliding_window_view(flat, CONTEXT + FRAME)[::FRAME]
            probs, h, c = self.session.run(None, {"input": np.ascontiguousarray(frames), "h": h, "c": c})
            out.append(np.asarray(probs, dtype=np.float32).reshape(-1))
        return np.concatenate(out)[:n]


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _model() -> _Silero:
    return _Silero()


def model() -> _Silero:
    with _lock:  # two pool workers must not both build the session
        return _model()


def speech_spans(samples: np.ndarray, options: VadOptions = VadOptions()) -> list[tuple[int, int]]:
    """(start, end) sample ranges of speech, padded, in order and not overlapping."""
    if len(samples) == 0:
        return []
    probs = model().probabilities(samples)
    on, off = options.threshold, max(options.threshold - 0.15, 0.01)
    min_silence = int(options.silence_duration_ms * SAMPLE_RATE / 1000)
    spans: list[list[int]] = []
    start: int | None = None
    quiet_since: int | None = None
    for i, p in enumerate(probs):
        pos = i * FRAME
        if start is None:
            if p >= on:
                start, quiet_since = pos, None
            continue
        if p >= on:
            quiet_since = None
        elif p < off:
            if quiet_since is None:
                quiet_since = pos
            if pos + FRAME - quiet_since >= min_silence:
                spans.append([start, quiet_since])
                start = quiet_since = None
    if start is not None:
        spans.append([start, len(samples) if quiet_since is None else quiet_since])
    pad = int(options.prefix_padding_ms * SAMPLE_RATE / 1000)
    for i, span in enumerate(spans):
        before = span[0] if i == 0 else (span[0] - spans[i - 1][1]) // 2
        after = len(samples) - span[1] if i == len(spans) - 1 else (spans[i + 1][0] - span[1]) // 2
        span[0] -= min(pad, before)
        span[1] += min(pad, after)
    return [(max(0, a), min(len(samples), b)) for a, b in spans if b > a]


def speech_windows(
    samples: np.ndarray,
    options: VadOptions = VadOptions(),
    search_s: float = 8.0,
    spans: list[tuple[int, int]] | None = None,
    whole_if_short: bool = True,
) -> list[Window]:
    """Windows of at most 30 s covering every speech span and the pauses between them, but no pause of
    MAX_GAP_S or more. Audio of 30 s or less with any speech in it is one window, whole: it costs one
    30 s window either way, and Silero misses some speech (whispers) that Whisper still reads.
    ``whole_if_short=False`` when ``samples`` is a stretch of longer audio (the rule is for whole uploads)."""
    if spans is None:
        spans = speech_spans(samples, options)
    if not spans:
        return []
    if whole_if_short and len(samples) <= WINDOW_S * SAMPLE_RATE:
        return [Window(0, len(samples))]
    max_gap = int(MAX_GAP_S * SAMPLE_RATE)
    max_len = int(WINDOW_S * SAMPLE_RATE)
    search = int(search_s * SAMPLE_RATE)
    windows: list[Window] = []
    start, end = spans[0]
    pauses: list[int] = []  # where a pause inside the region is (the middle of the gap between two spans)
    for span_start, span_end in [*spans[1:], (len(samples) + max_gap, 0)]:
        if span_start - end < max_gap:
            pauses.append((end + span_start) // 2)
            end = span_end
            continue
        # The region [start, end) is complete: cut it at its last pause before each 30 s limit.
        while end - start > max_len:
            limit = start + max_len
            fits = [p for p in pauses if limit - search <= p <= limit]
            cut = fits[-1] if fits else windows_cut(samples, start, limit, search)
            windows.append(Window(start, cut))
            start = cut
        windows.append(Window(start, end))
        start, end, pauses = span_start, span_end, []
    return windows


def energy_speech(features: np.ndarray, n_frames: int) -> list[tuple[int, int]]:
    """(start, end) frame ranges of a window's normalised log-mel (n_mels x frames) whose level rises
    ENERGY_RISE above the window's floor."""
    if n_frames <= 0:
        return []
    level = features[:, :n_frames].mean(axis=0)
    loud = level > np.percentile(level, 10) + ENERGY_RISE
    edges = np.flatnonzero(np.diff(np.concatenate(([0], loud.view(np.int8), [0]))))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def window_speech(
    samples: np.ndarray, features: np.ndarray, n_frames: int, offset_s: float
) -> list[tuple[float, float]]:
    """Speech in one window, in seconds of the upload: loud stretches by energy when they add up to
    ENERGY_ENOUGH_S, else what Silero finds in the window's samples (padded, as :func:`speech_spans`)."""
    loud = energy_speech(features, n_frames)
    if sum(b - a for a, b in loud) >= ENERGY_ENOUGH_S * FRAMES_PER_S:
        return [(offset_s + a / FRAMES_PER_S, offset_s + b / FRAMES_PER_S) for a, b in loud]
    return [(offset_s + a / SAMPLE_RATE, offset_s + b / SAMPLE_RATE) for a, b in speech_spans(samples)]


def windows_cut(samples: np.ndarray, start: int, limit: int, search: int) -> int:
    """No pause near the limit: cut at the quietest 100 ms before it, as split_windows does."""
    region_start = max(start + 1, limit - search)
    return region_start + quietest_point(samples[region_start:limit], SAMPLE_RATE)
