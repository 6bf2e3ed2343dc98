"""Whisper's log-mel spectrogram, computed in the API process.

The mel filter bank and the Hann window are built once per parameter set (a small bounded cache: the
parameters come from the model, not from users). A window shorter than 30 s is padded with silence as
Whisper expects, but only the frames that touch audio are transformed: the rest are known to be silent.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_S = 30
N_SAMPLES = CHUNK_S * SAMPLE_RATE
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 frames of 10 ms
FRAMES_PER_SECOND = SAMPLE_RATE // HOP_LENGTH
PAD_MODE = "silence"
"""How a window shorter than 30 s is padded: "silence", the log-mel of digital silence (the floor, 8 log10
units under the window's peak), as openai-whisper's transcribe() gets by padding the audio with 30 s of
zeros and as Whisper saw in training (pad_or_trim on the audio); or "zero", 0.0 in the normalised log-mel,
as faster-whisper's pad_or_trim on the features does."""


def _hz_to_mel(freq: np.ndarray) -> np.ndarray:
    """Slaney's mel scale (librosa's default, what Whisper was trained with)."""
    f_sp = 200.0 / 3
    mels = freq / f_sp
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, np.log(6.4) / 27.0
    log_region = freq >= min_log_hz
    mels[log_region] = min_log_mel + np.log(freq[log_region] / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    f_sp = 200.0 / 3
    freqs = f_sp * mels
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, np.log(6.4) / 27.0
    log_region = mels >= min_log_mel
    freqs[log_region] = min_log_hz * np.exp(logstep * (mels[log_region] - min_log_mel))
    return freqs


@lru_cache(maxsize=4)
def mel_filters(n_mels: int, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT) -> np.ndarray:
    """Slaney-normalised triangular filters, shape (n_mels, n_fft // 2 + 1), float32. Read-only."""
    fft_freqs = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    mel_edges = _mel_to_hz(
        np.linspace(_hz_to_mel(np.array([0.0]))[0], _hz_to_mel(np.array([sample_rate / 2.0]))[0], n_mels + 2)
    )
    widths = np.diff(mel_edges)
    ramps = mel_edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_edges[2:] - mel_edges[:-2]))[:, None]
    weights = weights.astype(np.float32)
    weights.flags.writeable = False
    return weights


@lru_cache(maxsize=4)
def hann_window(n_fft: int = N_FFT) -> np.ndarray:
    """Periodic Hann window (as torch.hann_window), float32. Read-only."""
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)
    window.flags.writeable = False
    return window


def log_mel(samples: np.ndarray, n_mels: int = 80) -> tuple[np.ndarray, int]:
    """Log-mel features of at most 30 s of 16 kHz mono audio, padded to 30 s.

    Returns ``(features, n_frames)``: features is float32 of shape (n_mels, 3000); n_frames is how many
    frames hold audio (the rest is padding).
    """
    features, n_frames, _ = log_mel_and_power(samples, n_mels)
    return features, n_frames


def log_mel_and_power(samples: np.ndarray, n_mels: int = 80) -> tuple[np.ndarray, int, np.ndarray]:
    """:func:`log_mel`, and the power spectrum it was made from: (frames, 201) float32, frame ``i`` centred
    on sample ``i * 160``, the edges padded by reflection, the frames past the audio's reach left out. The
    speaker features read it too (speakers/features.py), so that a window is transformed once."""
    n = len(samples)
    if n > N_SAMPLES:
        raise ValueError(f"a window holds at most {N_SAMPLES} samples, got {n}")
    half = N_FFT // 2
    # The 30 s signal with torch.stft(center=True)'s reflect padding on both sides.
    signal = np.zeros(N_SAMPLES + N_FFT, dtype=np.float32)
    signal[half : half + n] = samples
    if n > half:
        signal[:half] = samples[1 : half + 1][::-1]
    if n == N_SAMPLES:
        signal[half + n :] = samples[-half - 1 : -1][::-1]
    # Frames past the audio (plus the FFT's reach) are all zero: compute only the others.
    n_active = min(N_FRAMES, (n + half) // HOP_LENGTH + 1)
    frames = np.lib.stride_tricks.sliding_window_view(signal, N_FFT)[: n_active * HOP_LENGTH : HOP_LENGTH]
    spectrum = np.fft.rfft(frames * hann_window(), axis=-1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    mel = power @ mel_filters(n_mels).T  # (n_active, n_mels)
    log_spec = np.full((n_mels, N_FRAMES), -10.0, dtype=np.float32)  # log10(1e-10): silence
    log_spec[:, :n_active] = np.log10(np.maximum(mel.T, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    log_spec = (log_spec + 4.0) / 4.0
    n_frames = min(N_FRAMES, (n + HOP_LENGTH - 1) // HOP_LENGTH)
    if PAD_MODE == "zero":
        log_spec[:, n_frames:] = 0.0
    return log_spec, n_frames, power


def pad_frames(features: np.ndarray, n_frames: int, peak: float) -> np.ndarray:
    """``features`` (normalised log-mel frames of audio) padded at the end to ``n_frames`` frames, the way
    :func:`log_mel` pads a short window; ``peak`` is the largest value of the window they came from."""
    pad = 0.0 if PAD_MODE == "zero" else peak - 2.0  # the floor: (max - 8 + 4) / 4
    out = np.full((features.shape[0], n_frames), pad, dtype=np.float32)
    out[:, : features.shape[1]] = features
    return out
