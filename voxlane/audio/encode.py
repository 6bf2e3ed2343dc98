"""Streaming audio encoders for text to speech: wav, pcm, mp3, opus (ogg), aac (adts) and flac.

A ``StreamEncoder`` takes mono int16 PCM chunks as synthesis produces them and returns the encoded
bytes that are ready to send, so the body streams as it is produced. ``wav`` gets a streaming header
(the data size is unknown, so it says "as long as the stream"); ``pcm`` is raw 16-bit little-endian.
Everything else goes through one PyAV muxer per stream writing into memory (no ffmpeg subprocess),
resampling to the rate the codec accepts (opus: 48, 24, 16, 12 or 8 kHz).

Encoders live in the API process's encode worker processes (``open_stream`` and friends below), one
stream's calls always in one worker, one after another: an encoder is never used from two threads.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

import av
import numpy as np

SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
OPUS_RATES = (48000, 24000, 16000, 12000, 8000)
PCM_DEFAULT_RATE = 24000
"""OpenAI's ``pcm`` is 24 kHz 16-bit little-endian mono, and stock clients play it at that rate."""
SLICE_S = 0.25
"""Audio is resampled and muxed this many seconds at a time. PyAV holds the GIL through parts of both,
up to 10-16 ms for a whole sentence at once; in slices, at most 3.5-6.4 ms, for any thread that shares the
encoding process (measured when encoding still ran on threads beside the event loop)."""


@dataclass(frozen=True)
class _Container:
    format: str
    codec: str
    sample_format: str
    media_type: str
    bit_rate: int | None = None
    options: dict[str, str] | None = None
    """Muxer options; ogg holds pages for 1 s by default, which would delay every opus chunk."""


_CONTAINERS = {
    "mp3": _Container("mp3", "libmp3lame", "s16p", "audio/mpeg", 64000),
    "opus": _Container("ogg", "libopus", "s16", "audio/ogg", 32000, {"page_duration": "20000"}),
    "aac": _Container("adts", "aac", "fltp", "audio/aac", 64000),
    "flac": _Container("flac", "flac", "s16", "audio/flac"),
}
_MP3_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)
_AAC_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)

MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", **{k: c.media_type for k, c in _CONTAINERS.items()}}


def output_rate(response_format: str, source_rate: int, requested: int | None) -> int:
    """The sample rate a stream is encoded at: the requested one (or the voice's) moved to the nearest
    rate the codec supports. Opus only takes 48/24/16/12/8 kHz, so 22.05 kHz becomes 24 kHz."""
    if requested is None:
        requested = PCM_DEFAULT_RATE if response_format == "pcm" else source_rate
    if response_format == "opus":
        return _closest_at_least(OPUS_RATES, requested)
    if response_format == "mp3":
        return _closest_at_least(_MP3_RATES, requested)
    if response_format == "aac":
        return _closest_at_least(_AAC_RATES, requested)
    return requested


def _closest_at_least(rates: tuple[int, ...], wanted: int) -> int:
    """The smallest supported rate not below ``wanted`` (never upsample less than asked), else the largest."""
    fitting = [r for r in rates if r >= wanted]
    return min(fitting) if fitting else max(rates)


def wav_header(sample_rate: int, channels: int = 1, bits: int = 16, data_bytes: int | None = None) -> bytes:
    """A RIFF/WAVE header for PCM. Without ``data_bytes`` it is a stream's header, of unknown length: both
    sizes are 0xFFFFFFFF, which players (ffmpeg, browsers, sox) read as "until the end of the data"."""
    unknown = 0xFFFFFFFF
    block_align = channels * bits // 8
    return (
        b"RIFF"
        + struct.pack("<I", unknown if data_bytes is None else 36 + data_bytes)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, sample_rate, sample_rate * block_align, block_align, bits)
        + b"data"
        + struct.pack("<I", unknown if data_bytes is None else data_bytes)
    )


class _Sink:
    """A write-only, non-seekable file for the muxer: bytes accumulate until the encoder takes them."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


class StreamEncoder:
    """Encode one stream. ``encode(pcm)`` and ``finish()`` return the bytes ready to send (maybe b'')."""

    def __init__(self, response_format: str, source_rate: int, sample_rate: int | None = None) -> None:
        if response_format not in SPEECH_FORMATS:
            raise ValueError(f"unknown format {response_format!r}")
        self.format = response_format
        self.source_rate = source_rate
        self.sample_rate = output_rate(response_format, source_rate, sample_rate)
        self.media_type = MEDIA_TYPES[response_format]
        self._header_sent = False
        self._pts = 0
        self._resampler = (
            av.AudioResampler(
                format=_CONTAINERS[response_format].sample_format if response_format in _CONTAINERS else "s16",
                layout="mono",
                rate=self.sample_rate,
            )
            if response_format in _CONTAINERS or self.sample_rate != source_rate
            else None
        )
        self._sink: _Sink | None = None
        self._container: av.container.OutputContainer | None = None
        self._stream: av.AudioStream | None = None
        if response_format in _CONTAINERS:
            spec = _CONTAINERS[response_format]
            self._sink = _Sink()
            self._container = av.open(self._sink, mode="w", format=spec.format, options=spec.options or {})
            stream = cast(av.AudioStream, self._container.add_stream(spec.codec, rate=self.sample_rate))
            stream.layout = "mono"
            stream.format = spec.sample_format
            if spec.bit_rate:
                stream.bit_rate = spec.bit_rate
            stream.time_base = Fraction(1, self.sample_rate)
            self._stream = stream

    def encode(self, pcm: np.ndarray) -> bytes:
        """``pcm``: mono int16 at ``source_rate``."""
        parts = [self._take_header()]
        step = max(1, int(self.source_rate * SLICE_S))
        for start in range(0, len(pcm), step):  # short slices: short GIL holds (see SLICE_S)
            frames = self._resample(pcm[start : start + step])
            parts.append(b"".join(_s16_bytes(f) for f in frames) if self._container is None else self._mux(frames))
        return b"".join(parts)

    def finish(self) -> bytes:
        out = self._take_header()
        frames = self._resampler.resample(None) if self._resampler is not None else []
        if self._container is None:
            return out + b"".join(_s16_bytes(f) for f in frames)
        assert self._stream is not None and self._sink is not None
        data = self._mux(frames)
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        self._container = None
        return data + self._sink.take()

    def close(self) -> None:
        """Free the codec without finishing the stream (client gone). Idempotent."""
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.close()
            self._container = None

    def _take_header(self) -> bytes:
        """wav's streaming header, the first time it is asked for; b'' otherwise and for other formats."""
        if self.format != "wav" or self._header_sent:
            return b""
        self._header_sent = True
        return wav_header(self.sample_rate)

    def _resample(self, pcm: np.ndarray) -> list[av.AudioFrame]:
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(pcm, dtype=np.int16).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = self.source_rate
        if self._resampler is None:
            return [frame]
        return list(self._resampler.resample(frame))

    def _mux(self, frames: list[av.AudioFrame]) -> bytes:
        assert self._container is not None and self._stream is not None and self._sink is not None
        for frame in frames:
            frame.pts = self._pts
            frame.time_base = Fraction(1, self.sample_rate)
            self._pts += frame.samples
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        return self._sink.take()


def _s16_bytes(frame: av.AudioFrame) -> bytes:
    return frame.to_ndarray().astype("<i2", copy=False).tobytes()


# The encode pool's worker processes keep each stream's encoder here, keyed by request id. A stream always
# goes to the same worker (``Executors.run_encode``), so its calls run in order in one place.
_STREAMS: dict[str, StreamEncoder] = {}


def open_stream(key: str, response_format: str, source_rate: int, sample_rate: int | None) -> str:
    """Create the stream's encoder in this worker; returns its media type."""
    _STREAMS[key] = encoder = StreamEncoder(response_format, source_rate, sample_rate)
    return encoder.media_type


def encode_stream(key: str, pcm: np.ndarray) -> bytes:
    return _STREAMS[key].encode(pcm)


def finish_stream(key: str) -> bytes:
    """The stream's tail; b'' when asked again. The encoder stays until ``close_stream``."""
    return _STREAMS[key].finish()


def close_stream(key: str) -> None:
    """Drop the stream's encoder, finished or not. Idempotent."""
    encoder = _STREAMS.pop(key, None)
    if encoder is not None:
        encoder.close()
