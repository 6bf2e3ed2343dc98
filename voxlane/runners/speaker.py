"""The speaker encoder: Resemblyzer's GE2E network (3 LSTM layers of 256 over 40 mel bands, a linear layer
of 256 with ReLU, L2-normalised) run with numpy, on weights converted from its checkpoint at install time
(voxlane/speakers/weights.py). It embeds partial utterances of 1.6 s (160 frames of 10 ms), many at once:
each LSTM step is one matrix product over the whole batch. No torch, no onnxruntime: numpy's BLAS, whose
threads the engine sets (--speaker-threads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from voxlane.speakers.diarize import PARTIAL_FRAMES, partial_starts
from voxlane.speakers.features import N_MELS

HOP_FRAMES = 160
"""Partials every 1.6 s over a region (the last one ends at its end): a region of up to 2 s gets one, of 3 s
(the longest, features.py MAX_REGION_FRAMES) two. Half-overlapping partials (0.8 s) cost twice as much and
did not find speakers better (docs/diarization.md)."""
MAX_BATCH = 64
"""Partials embedded in one pass: bounds the LSTM's activations (64 x 160 x 256 floats a layer, 10 MB)."""


def _gate_layout(hidden: int) -> tuple[np.ndarray, np.ndarray]:
    """The columns of torch's gates (i, f, g, o) reordered to i, f, o, g, so that the three sigmoid gates
    are one slice, and their scale: 0.5 for them (sigmoid(x) = (tanh(x / 2) + 1) / 2, exact in floating
    point), 1 for g; one tanh then serves all four."""
    order = np.r_[0 : 2 * hidden, 3 * hidden : 4 * hidden, 2 * hidden : 3 * hidden]
    scale = np.ones(4 * hidden, dtype=np.float32)
    scale[: 3 * hidden] = 0.5
    return order, scale


class SpeakerEncoder:
    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.layers = []
        for k in range(3):
            w_ih = weights[f"lstm.weight_ih_l{k}"].T
            w_hh = weights[f"lstm.weight_hh_l{k}"].T
            bias = weights[f"lstm.bias_ih_l{k}"] + weights[f"lstm.bias_hh_l{k}"]
            order, scale = _gate_layout(w_hh.shape[0])
            self.layers.append(
                (
                    np.ascontiguousarray(w_ih[:, order] * scale, dtype=np.float32),
                    np.ascontiguousarray(w_hh[:, order] * scale, dtype=np.float32),
                    (bias[order] * scale).astype(np.float32),
                )
            )
        self.linear_w = np.ascontiguousarray(weights["linear.weight"].T, dtype=np.float32)
        self.linear_b = weights["linear.bias"].astype(np.float32)
        self.hidden = self.layers[0][1].shape[0]
        self.dim = self.linear_w.shape[1]

    @classmethod
    def load(cls, path: str | Path) -> SpeakerEncoder:
        with np.load(path) as npz:
            return cls({k: npz[k] for k in npz.files})

    def embed_regions(self, mel: np.ndarray, regions: list[tuple[int, int]]) -> tuple[np.ndarray, list[int]]:
        """One L2-normalised embedding per region of ``mel`` (frames x 40): the mean of its partials'; and how
        many partials each had."""
        return self.embed_windows([(mel, regions)])[0]

    def embed_windows(
        self, windows: list[tuple[np.ndarray, list[tuple[int, int]]]]
    ) -> list[tuple[np.ndarray, list[int]]]:
        """``embed_regions`` of several windows, their partials in shared batches: an LSTM step reads its
        1 MB of recurrent weights whatever the batch, so 16 partials (one window's) cost about 9 ms each and
        64 about 6.5 (docs/diarization.md). One result per window, in order."""
        partials: list[np.ndarray] = []
        plans: list[list[list[int]]] = []
        for features, regions in windows:
            mel = features[:, :N_MELS]  # a window's features: GE2E's 40 mel bands first (speakers/features.py)
            n_frames = len(mel)
            if n_frames < PARTIAL_FRAMES:
                pad = np.zeros((PARTIAL_FRAMES - n_frames, mel.shape[1]), dtype=np.float32)
                mel = np.concatenate([mel, pad])
            plan = [partial_starts(a, b, n_frames, HOP_FRAMES) for a, b in regions]
            partials.extend(mel[s : s + PARTIAL_FRAMES] for region in plan for s in region)
            plans.append(plan)
        vectors = np.empty((len(partials), self.dim), dtype=np.float32)
        for i in range(0, len(partials), MAX_BATCH):
            vectors[i : i + MAX_BATCH] = self.embed(np.stack(partials[i : i + MAX_BATCH]))
        out = []
        at = 0
        for plan in plans:
            embeddings = np.empty((len(plan), self.dim), dtype=np.float32)
            for k, region in enumerate(plan):
                mean = vectors[at : at + len(region)].mean(axis=0)
                embeddings[k] = mean / max(float(np.linalg.norm(mean)), 1e-12)
                at += len(region)
            out.append((embeddings, [len(region) for region in plan]))
        return out

    def embed(self, mels: np.ndarray) -> np.ndarray:
        """(batch, frames, 40) mel power -> (batch, 256) L2-normalised embeddings.

        Time-major, in place, one tanh over all four gates a step (the weights' layout, ``_gate_layout``):
        the numbers are torch's LSTM's (tests/unit/test_speaker_encoder.py holds the plain version) at about
        20% less CPU than one numpy call per gate, which dominated at a window's 10-20 partials."""
        x = np.ascontiguousarray(np.swapaxes(np.asarray(mels, dtype=np.float32), 0, 1))
        steps, batch, _ = x.shape
        h_size = self.hidden
        gates = np.empty((batch, 4 * h_size), dtype=np.float32)
        sigmoids = gates[:, : 3 * h_size]
        i, f, o = gates[:, :h_size], gates[:, h_size : 2 * h_size], gates[:, 2 * h_size : 3 * h_size]
        cell = gates[:, 3 * h_size :]
        i_cell = np.empty((batch, h_size), dtype=np.float32)
        h = np.zeros((batch, h_size), dtype=np.float32)
        for w_ih, w_hh, bias in self.layers:
            gates_in = x.reshape(steps * batch, -1) @ w_ih
            gates_in += bias
            gates_in = gates_in.reshape(steps, batch, 4 * h_size)
            out = np.empty((steps, batch, h_size), dtype=np.float32)
            h = np.zeros((batch, h_size), dtype=np.float32)
            c = np.zeros((batch, h_size), dtype=np.float32)
            for t in range(steps):
                np.matmul(h, w_hh, out=gates)
                gates += gates_in[t]
                np.tanh(gates, out=gates)
                sigmoids *= 0.5  # sigmoid(x) = (tanh(x / 2) + 1) / 2: the halving is in the weights
                sigmoids += 0.5
                c *= f
                np.multiply(i, cell, out=i_cell)
                c += i_cell
                h = out[t]
                np.tanh(c, out=h)
                h *= o
            x = out
        raw = np.maximum(h @ self.linear_w + self.linear_b, 0.0)
        norm = np.linalg.norm(raw, axis=1, keepdims=True)
        return raw / np.maximum(norm, 1e-12)


def load_encoder(path: str | Path) -> Any:
    """The encoder whose weights ``path`` (.npz) holds: GE2E's LSTM or CAM++ (runners/campplus.py)."""
    with np.load(path) as npz:
        weights = {k: npz[k] for k in npz.files}
    if "xvector.dense.linear.weight" in weights:
        from voxlane.runners.campplus import CampPlusEncoder

        return CampPlusEncoder(weights)
    return SpeakerEncoder(weights)
