"""The speaker encoder's input: a 40-band mel power spectrogram of 16 kHz audio, 25 ms windows every 10 ms,
as Resemblyzer computes it with librosa (``melspectrogram(n_fft=400, hop_length=160, n_mels=40)``: Slaney
mel filters, a periodic Hann window, centred frames, power, no log), after its loudness normalisation
(raised to -30 dBFS, never lowered)."""

from __future__ import annotations

import numpy as np

from voxlane.audio.features import hann_window, mel_filters

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 40
FRAMES_PER_S = SAMPLE_RATE // HOP
TARGET_DBFS = -30.0


def speaker_mel(samples: np.ndarray, loudness_of: np.ndarray | None = None) -> np.ndarray:
    """(frames, 40) float32: frame ``i`` is centred on sample ``i * 160``. The loudness gain is measured on
    ``loudness_of`` (the speech in ``samples``) when given, so that pauses do not raise it."""
    x = samples.astype(np.float32) / 32768.0 if samples.dtype == np.int16 else samples.astype(np.float32)
    ref = x if loudness_of is None or not len(loudness_of) else loudness_of
    rms_db = 10 * np.log10(max(float(np.mean(ref.astype(np.float64) ** 2)), 1e-20))
    gain_db = TARGET_DBFS - rms_db
    if gain_db > 0:
        x = x * np.float32(10 ** (gain_db / 20))
    half = N_FFT // 2
    padded = np.zeros(len(x) + N_FFT, dtype=np.float32)
    padded[half : half + len(x)] = x
    n_frames = 1 + len(x) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[: n_frames * HOP : HOP]
    spectrum = np.fft.rfft(frames * hann_window(N_FFT), axis=-1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    return np.ascontiguousarray(power @ mel_filters(N_MELS, SAMPLE_RATE, N_FFT).T)
