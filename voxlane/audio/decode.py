"""Decode any supported container to mono float32 at 16 kHz, within limits.

soundfile (libsndfile) first: it is the fastest for wav, flac and ogg/vorbis and releases the GIL.
PyAV (FFmpeg) for the rest: mp3, ogg/opus, webm, m4a/mp4, ... Both stop at the duration limit instead of
decoding a small file that expands to hours into memory.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from voxlane.audio.resample import resamplers
from voxlane.errors import PayloadTooLarge, UnsupportedAudio

TARGET_RATE = 16000
MIN_SOURCE_RATE = 1000
MAX_SOURCE_RATE = 768000
MIN_DURATION_S = 0.1  # OpenAI rejects shorter audio too ("audio_too_short")
_FORMATS_HINT = "send wav, flac, mp3, ogg (vorbis or opus), webm or m4a/mp4 audio"


@dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray
    """Mono float32 at 16 kHz."""
    source_rate: int
    channels: int

    @property
    def duration_s(self) -> float:
        return len(self.samples) / TARGET_RATE


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


def _decode_soundfile(data: bytes, max_duration_s: float) -> tuple[np.ndarray, int, int] | None:
    import soundfile as sf

    try:
        with sf.SoundFile(io.BytesIO(data)) as f:
            rate, channels = f.samplerate, f.channels
            if f.format not in ("WAV", "WAVEX", "FLAC", "OGG", "AIFF") or (f.format == "OGG" and f.subtype != "VORBIS"):
                return None  # PyAV is better at the rest (mp3 frame padding, opus pre-skip)
            _check_rate(rate)
            max_frames = int(max_duration_s * rate) + 1
            audio = f.read(frames=max_frames + 1, dtype="float32", always_2d=True)
    except UnsupportedAudio:
        raise
    except Exception:
        return None
    if len(audio) > max_frames:
        raise _too_long(max_duration_s)
    return audio.mean(axis=1, dtype=np.float32) if channels > 1 else audio[:, 0], rate, channels


def _decode_pyav(data: bytes, max_duration_s: float) -> tuple[np.ndarray, int, int]:
    import av

    try:
        container = av.open(io.BytesIO(data), mode="r", metadata_errors="ignore")
    except Exception as exc:
        raise UnsupportedAudio(
            f"could not read the file as audio ({exc.__class__.__name__}): {_FORMATS_HINT}"
        ) from None
    with container:
        if not container.streams.audio:
            raise UnsupportedAudio(f"the file has no audio stream: {_FORMATS_HINT}")
        stream = container.streams.audio[0]
        stream.thread_type = "AUTO"  # type: ignore[attr-defined]  # PyAV has it; its stubs do not
        rate = stream.codec_context.sample_rate or stream.rate or 0
        _check_rate(rate)
        channels = stream.codec_context.channels or 1
        max_frames = int(max_duration_s * rate) + 1
        chunks: list[np.ndarray] = []
        total = 0
        try:
            for frame in container.decode(stream):
                if frame.sample_rate != rate:
                    _check_rate(frame.sample_rate)
                    raise UnsupportedAudio("the sample rate changes inside the stream: re-encode the file")
                pcm = frame.to_ndarray()
                if frame.format.is_planar:
                    mono = pcm.mean(axis=0, dtype=np.float32) if pcm.shape[0] > 1 else pcm[0]
                else:
                    mono = pcm.reshape(-1, len(frame.layout.channels)).mean(axis=1, dtype=np.float32)
                mono = _to_float(mono, frame.format.name)
                chunks.append(mono)
                total += len(mono)
                if total > max_frames:
                    raise _too_long(max_duration_s)
        except (UnsupportedAudio, PayloadTooLarge):
            raise
        except Exception as exc:
            if total == 0:
                raise UnsupportedAudio(
                    f"could not decode the audio ({exc.__class__.__name__}): the file is damaged or not "
                    f"audio; {_FORMATS_HINT}"
                ) from None
            # A truncated tail: keep what decoded, as ffmpeg does.
    if not chunks:
        raise UnsupportedAudio(f"the file holds no audio samples: {_FORMATS_HINT}")
    return np.concatenate(chunks).astype(np.float32, copy=False), rate, channels


def _to_float(pcm: np.ndarray, fmt: str) -> np.ndarray:
    if fmt.startswith("s16"):
        return pcm.astype(np.float32) / 32768.0
    if fmt.startswith("s32"):
        return pcm.astype(np.float32) / 2147483648.0
    if fmt.startswith("u8"):
        return (pcm.astype(np.float32) - 128.0) / 128.0
    return pcm.astype(np.float32, copy=False)


def decode_audio(data: bytes, max_duration_s: float) -> DecodedAudio:
    """Bytes of an audio file in, 16 kHz mono float32 out. Raises UnsupportedAudio or PayloadTooLarge."""
    if not data:
        raise UnsupportedAudio(f"the uploaded file is empty: {_FORMATS_HINT}")
    decoded = _decode_soundfile(data, max_duration_s)
    samples, rate, channels = decoded if decoded is not None else _decode_pyav(data, max_duration_s)
    if len(samples) == 0:
        raise UnsupportedAudio(f"the file holds no audio samples: {_FORMATS_HINT}")
    if len(samples) < MIN_DURATION_S * rate:
        raise UnsupportedAudio(
            f"the file holds only {len(samples) / rate:.3f} s of audio (truncated or nearly empty); "
            f"send at least {MIN_DURATION_S:g} s",
            code="audio_too_short",
        )
    if not np.isfinite(samples).all():
        samples = np.nan_to_num(samples, nan=0.0, posinf=1.0, neginf=-1.0)
    return DecodedAudio(resamplers.resample(samples, rate, TARGET_RATE), rate, channels)
