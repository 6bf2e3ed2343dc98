"""A spectral gate: noise reduction for the realtime endpoint's ``noise_reduction`` (OpenAI's ``near_field``
and ``far_field``), measured before it is used (docs/realtime.md, "Noise reduction: not applied").

The noise floor of each frequency band is its mean magnitude over the quietest tenth of the frames (the
pauses between words); each time-frequency cell is attenuated by how far it stands above that floor, with a
soft mask smoothed over neighbouring cells so that the gate does not chirp ("musical noise"). ``far_field``
gates harder than ``near_field``: a distant microphone hears more room and less voice.
"""

from __future__ import annotations

import numpy as np

N_FFT = 512
"""32 ms at 16 kHz."""
HOP = 128
STRENGTHS = {"near_field": 1.5, "far_field": 2.5}
"""How many times the noise floor a cell must stand above to pass untouched, by OpenAI's type names."""
FLOOR_GAIN = 0.1
"""The gain of a cell at or below the floor (-20 dB): not 0, so that the gate never leaves holes."""


def spectral_gate(audio: np.ndarray, strength: str) -> np.ndarray:
    """``audio`` (float32 mono) with its stationary noise gated out; the same length."""
    if len(audio) < N_FFT:
        return audio
    factor = STRENGTHS[strength]
    window = np.hanning(N_FFT).astype(np.float32)
    padded = np.pad(audio, (N_FFT // 2, N_FFT // 2 + HOP), mode="reflect")
    n_frames = 1 + (len(padded) - N_FFT) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP][:n_frames] * window
    spec = np.fft.rfft(frames, axis=1)
    mag = np.abs(spec)
    energy = mag.sum(axis=1)
    quiet = mag[energy <= np.percentile(energy, 10)]
    floor = quiet.mean(axis=0, keepdims=True) + 1e-9
    ratio = mag / (floor * factor)
    gain = np.clip((ratio - 1 / factor) / (1 - 1 / factor), FLOOR_GAIN, 1.0)
    gain = _smooth(gain)
    out_frames = np.fft.irfft(spec * gain, n=N_FFT, axis=1) * window
    out = np.zeros(len(padded), dtype=np.float64)
    norm = np.zeros(len(padded), dtype=np.float64)
    for i in range(n_frames):  # overlap-add
        out[i * HOP : i * HOP + N_FFT] += out_frames[i]
        norm[i * HOP : i * HOP + N_FFT] += window**2
    out = out / np.maximum(norm, 1e-6)
    return out[N_FFT // 2 : N_FFT // 2 + len(audio)].astype(np.float32)


def _smooth(gain: np.ndarray) -> np.ndarray:
    """A 3 x 5 (time x frequency) moving average of the mask."""
    padded = np.pad(gain, ((1, 1), (2, 2)), mode="edge")
    out = np.zeros_like(gain)
    for dt in range(3):
        for df in range(5):
            out += padded[dt : dt + gain.shape[0], df : df + gain.shape[1]]
    return out / 15
