"""Decode any supported container to mono 16 kHz int16, a block at a time, within limits.

soundfile (libsndfile) first: it is the fastest for wav, flac and ogg/vorbis and releases the GIL.
PyAV (FFmpeg) for the rest: mp3, ogg/opus, webm, m4a/mp4, ... Both stop at the duration limit instead of
decoding a small file that expands to hours into memory.

The file is never in memory whole as float32 (four 0.6 MB FLACs of 2.9 hours of near-silence took
the API process to 2.8 GB): :func:`decode_stream` decodes, mixes down and resamples ``BLOCK_FRAMES`` source
frames at a time and hands each block on as int16 (2 bytes a sample, and exact for 16-bit sources); what is
kept of it is the caller's choice (audio/pipeline.py keeps only the windows that hold sound).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxlane.audio.resample import resamplers
from voxlane.errors import PayloadTooLarge, UnsupportedAudio

TARGET_RATE = 16000
MIN_SOURCE_RATE = 1000
MAX_SOURCE_RATE = 768000
MIN_DURATION_S = 0.1  # OpenAI rejects shorter audio too ("audio_too_short")
BLOCK_FRAMES = 1 << 16
"""Source frames decoded, resampled and handed on at a time (1.4 to 65 s, by the source rate)."""
_FORMATS_HINT = "send wav, flac, mp3, ogg (vorbis or opus), webm or m4a/mp4 audio"

BlockSink = Callable[[np.ndarray], None]
"""Takes each block of decoded audio: mono int16 at 16 kHz, in order."""
DecodeSteps = Generator[float, None, "DecodedInfo"]
"""A decode that yields the seconds of audio it has decoded so far after each chunk, and returns the info."""


@dataclass(frozen=True)
class DecodedInfo:
    n_samples: int
    """Samples at 16 kHz, handed on in all."""
    source_rate: int
    channels: int

    @property
    def duration_s(self) -> float:
        return self.n_samples / TARGET_RATE


@dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray
    """Mono float32 at 16 kHz."""
    source_rate: int
    channels: int

    @property
    def duration_s(self) -> float:
        return len(self.samples) / TARGET_RATE


def to_float(pcm: np.ndarray) -> np.ndarray:
    """int16 samples as float32 in [-1, 1), what the log-mel and the VAD read."""
    return np.multiply(pcm, 1.0 / 32768.0, dtype=np.float32)


class _Sink:
    """Mono float32 at the source rate in, in chunks of any size; 16 kHz int16 out to ``out``, one resampled
    block per ``BLOCK_FRAMES`` source frames. Raises PayloadTooLarge past the duration limit."""

    def __init__(
        self, rate: int, max_duration_s: float, out: BlockSink, resample: Callable[[np.ndarray, bool], np.ndarray]
    ) -> None:
        self.max_duration_s = max_duration_s
        self.max_frames = int(max_duration_s * rate) + 1
        self.frames = 0
        """Source frames taken."""
        self.samples = 0
        """16 kHz samples handed on."""
        self._out = out
        self._resample = resample
        self._pending: list[np.ndarray] = []
        self._pending_frames = 0

    def add(self, mono: np.ndarray) -> None:
        self.frames += len(mono)
        if self.frames > self.max_frames:
            raise _too_long(self.max_duration_s)
        self._pending.append(mono)
        self._pending_frames += len(mono)
        if self._pending_frames >= BLOCK_FRAMES:
            self._flush(last=False)

    def finish(self) -> None:
        self._flush(last=True)

    def _flush(self, last: bool) -> None:
        chunk = np.concatenate(self._pending) if self._pending else np.zeros(0, dtype=np.float32)
        self._pending, self._pending_frames = [], 0
        chunk = chunk.astype(np.float32, copy=False)
        if not np.isfinite(chunk).all():
            chunk = np.nan_to_num(chunk, nan=0.0, posinf=1.0, neginf=-1.0)
        resampled = self._resample(chunk, last)
        pcm = np.clip(np.rint(resampled * 32768.0), -32768, 32767).astype(np.int16)
        if len(pcm):
            self.samples += len(pcm)
            self._out(pcm)


def _check_rate(rate: int) -> None:
    if not MIN_SOURCE_RATE <= rate <= MAX_SOURCE_RATE:
        raise UnsupportedAudio(
            f"the audio declares a sample rate of {rate} Hz; voxlane accepts {MIN_SOURCE_RATE} to "
            f"{MAX_SOURCE_RATE} Hz: re-encode the file at a standard rate such as 16000 or 48000 Hz"
        )


def _too_long(max_duration_s: float) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the audio is longer than the server's limit of {max_duration_s:g} s (--max-audio-duration-s): "
        "split it into shorter files",
        param="file",
        code="audio_too_long",
    )


def _decode_soundfile(
    data: bytes, max_duration_s: float, out: BlockSink
) -> Generator[float, None, tuple[int, int, int, int] | None]:
    """(source frames, 16 kHz samples, rate, channels), or None when PyAV should read the file instead."""
    import soundfile as sf

    try:
        f = sf.SoundFile(io.BytesIO(data))
    except Exception:
        return None
    with f:
        rate, channels = f.samplerate, f.channels
        if f.format not in ("WAV", "WAVEX", "FLAC", "OGG", "AIFF") or (f.format == "OGG" and f.subtype != "VORBIS"):
            return None  # PyAV is better at the rest (mp3 frame padding, opus pre-skip)
        _check_rate(rate)
        with resamplers.stream(rate, TARGET_RATE) as resample:
            sink = _Sink(rate, max_duration_s, out, resample)
            while True:
                try:
                    block = f.read(frames=BLOCK_FRAMES, dtype="float32", always_2d=True)
                except Exception:
                    if sink.frames == 0:
                        return None
                    break  # a damaged tail: keep what decoded
                if not len(block):
                    break
                sink.add(block.mean(axis=1, dtype=np.float32) if channels > 1 else block[:, 0])
                yield sink.frames / rate
            sink.finish()
    return sink.frames, sink.samples, rate, channels


def _open_container(av: Any, data: bytes) -> Any:
    """``av.open`` of the upload, ignoring undecodable metadata where PyAV takes ``metadata_errors``
    (PyAV 19, the first for Python 3.12 only, does not: its open() raises TypeError for it)."""
    try:
        return av.open(io.BytesIO(data), mode="r", metadata_errors="ignore")
    except TypeError:
        return av.open(io.BytesIO(data), mode="r")


def _decode_pyav(
    data: bytes, max_duration_s: float, out: BlockSink
) -> Generator[float, None, tuple[int, int, int, int]]:
    """(source frames, 16 kHz samples, rate, channels)."""
    import av

    try:
        container = _open_container(av, data)
    except Exception as exc:
        raise UnsupportedAudio(
            f"could not read the file as audio ({exc.__class__.__name__}): {_FORMATS_HINT}"
        ) from None
    with container:
        if not container.streams.audio:
            raise UnsupportedAudio(f"the file has no audio stream: {_FORMATS_HINT}")
        stream = container.streams.audio[0]
        stream.thread_type = "AUTO"
        rate = stream.codec_context.sample_rate or stream.rate or 0
        _check_rate(rate)
        channels = stream.codec_context.channels or 1
        frames = container.decode(stream)
        with resamplers.stream(rate, TARGET_RATE) as resample:
            sink = _Sink(rate, max_duration_s, out, resample)
            while True:
                try:
                    frame = next(frames)
                    if frame.sample_rate != rate:
                        _check_rate(frame.sample_rate)
                        raise UnsupportedAudio("the sample rate changes inside the stream: re-encode the file")
                    pcm = frame.to_ndarray()
                    if frame.format.is_planar:
                        mono = pcm.mean(axis=0, dtype=np.float32) if pcm.shape[0] > 1 else pcm[0]
                    else:
                        mono = pcm.reshape(-1, len(frame.layout.channels)).mean(axis=1, dtype=np.float32)
                    mono = _to_float(mono, frame.format.name)
                except StopIteration:
                    break
                except UnsupportedAudio:
                    raise
                except Exception as exc:
                    if sink.frames == 0:
                        raise UnsupportedAudio(
                            f"could not decode the audio ({exc.__class__.__name__}): the file is damaged or not "
                            f"audio; {_FORMATS_HINT}"
                        ) from None
                    break  # a truncated tail: keep what decoded, as ffmpeg does
                sink.add(mono)  # outside the try: the sink's own errors (limits, the caller's) pass through
                yield sink.frames / rate
            sink.finish()
    return sink.frames, sink.samples, rate, channels


def _to_float(pcm: np.ndarray, fmt: str) -> np.ndarray:
    if fmt.startswith("s16"):
        return pcm.astype(np.float32) / 32768.0
    if fmt.startswith("s32"):
        return pcm.astype(np.float32) / 2147483648.0
    if fmt.startswith("u8"):
        return (pcm.astype(np.float32) - 128.0) / 128.0
    return pcm.astype(np.float32, copy=False)


def decode_steps(data: bytes, max_duration_s: float, out: BlockSink) -> DecodeSteps:
    """Decode the bytes of an audio file, handing each block (16 kHz mono int16) to ``out`` as it is ready,
    and yielding the seconds decoded so far after each chunk (so that a caller can do it in steps).
    Raises UnsupportedAudio or PayloadTooLarge (past ``max_duration_s``), and whatever ``out`` raises."""
    if not data:
        raise UnsupportedAudio(f"the uploaded file is empty: {_FORMATS_HINT}")
    decoded = yield from _decode_soundfile(data, max_duration_s, out)
    if decoded is None:
        decoded = yield from _decode_pyav(data, max_duration_s, out)
    frames, samples, rate, channels = decoded
    if frames == 0:
        raise UnsupportedAudio(f"the file holds no audio samples: {_FORMATS_HINT}")
    if frames < MIN_DURATION_S * rate:
        raise UnsupportedAudio(
            f"the file holds only {frames / rate:.3f} s of audio (truncated or nearly empty); "
            f"send at least {MIN_DURATION_S:g} s",
            code="audio_too_short",
        )
    return DecodedInfo(samples, rate, channels)


def decode_stream(data: bytes, max_duration_s: float, out: BlockSink) -> DecodedInfo:
    """:func:`decode_steps` in one go."""
    steps = decode_steps(data, max_duration_s, out)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def decode_audio(data: bytes, max_duration_s: float) -> DecodedAudio:
    """Bytes of an audio file in, all of it as 16 kHz mono float32 out (for tools and tests: the server
    keeps windows, see audio/pipeline.py). Raises UnsupportedAudio or PayloadTooLarge."""
    blocks: list[np.ndarray] = []
    info = decode_stream(data, max_duration_s, blocks.append)
    samples = to_float(np.concatenate(blocks)) if blocks else np.zeros(0, dtype=np.float32)
    return DecodedAudio(samples, info.source_rate, info.channels)
