"""The speaker encoder's LSTM (voxlane/runners/speaker.py: onnxruntime's LSTM operator on a graph built from
torch's weights, its gates reordered, all partials at once) against the plain one, written here as torch
documents its LSTM, one partial at a time, on random weights: no weights file needed."""

from __future__ import annotations

import numpy as np

from voxlane.runners.speaker import SpeakerEncoder

HIDDEN = 32
MELS = 40


def _weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    w: dict[str, np.ndarray] = {}
    for k in range(3):
        inputs = MELS if k == 0 else HIDDEN
        w[f"lstm.weight_ih_l{k}"] = rng.normal(0, 0.3, (4 * HIDDEN, inputs)).astype(np.float32)
        w[f"lstm.weight_hh_l{k}"] = rng.normal(0, 0.3, (4 * HIDDEN, HIDDEN)).astype(np.float32)
        w[f"lstm.bias_ih_l{k}"] = rng.normal(0, 0.3, 4 * HIDDEN).astype(np.float32)
        w[f"lstm.bias_hh_l{k}"] = rng.normal(0, 0.3, 4 * HIDDEN).astype(np.float32)
    w["linear.weight"] = rng.normal(0, 0.3, (HIDDEN, HIDDEN)).astype(np.float32)
    w["linear.bias"] = rng.normal(0, 0.3, HIDDEN).astype(np.float32)
    return w


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _reference(w: dict[str, np.ndarray], mel: np.ndarray) -> np.ndarray:
    """torch.nn.LSTM (gates i, f, g, o) + Linear + ReLU + L2 norm, one partial, float64."""
    x = mel.astype(np.float64)
    for k in range(3):
        h = np.zeros(HIDDEN)
        c = np.zeros(HIDDEN)
        out = []
        for x_t in x:
            g = w[f"lstm.weight_ih_l{k}"] @ x_t + w[f"lstm.bias_ih_l{k}"] + w[f"lstm.weight_hh_l{k}"] @ h
            g = g + w[f"lstm.bias_hh_l{k}"]
            i, f, cell, o = np.split(g, 4)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(cell)
            h = _sigmoid(o) * np.tanh(c)
            out.append(h)
        x = np.array(out)
    raw = np.maximum(w["linear.weight"] @ h + w["linear.bias"], 0.0)
    return raw / np.linalg.norm(raw)


def test_the_batched_encoder_gives_the_plain_lstms_embeddings() -> None:
    rng = np.random.default_rng(0)
    w = _weights(rng)
    mels = (rng.random((5, 50, MELS)) ** 4).astype(np.float32)
    got = SpeakerEncoder(w).embed(mels)
    want = np.array([_reference(w, m) for m in mels])
    assert got.shape == (5, HIDDEN)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_windows_embedded_together_give_each_windows_own_embeddings() -> None:
    rng = np.random.default_rng(1)
    encoder = SpeakerEncoder(_weights(rng))
    windows = [
        ((rng.random((n, MELS)) ** 4).astype(np.float32), regions)
        for n, regions in [(900, [(0, 120), (150, 400), (500, 900)]), (120, [(10, 100)]), (700, [(0, 300)])]
    ]
    together = encoder.embed_windows(windows)
    assert len(together) == len(windows)
    for (mel, regions), (vectors, partials) in zip(windows, together, strict=True):
        alone, alone_partials = encoder.embed_regions(mel, regions)
        assert partials == alone_partials
        np.testing.assert_allclose(vectors, alone, atol=1e-5)
