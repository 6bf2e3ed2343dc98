"""The CAM++ speaker encoder (3D-Speaker's ``CAMPPlus``: a 2D-convolutional front end over 80 filterbanks,
then densely connected TDNN blocks with context-aware masking, statistics pooling and a 192-dim layer) run
with numpy, in inference form: each batch norm folded into a scale and a shift. Weights: the
``campplus_cn_en_common`` checkpoint (Apache-2.0, 3D-Speaker), converted at install time
(voxlane/speakers/weights.py). No torch, no onnxruntime: numpy's BLAS, whose threads the engine sets
(--speaker-threads).

Each speech region is embedded whole (CAM++ pools over any length), from its filterbanks minus their mean
over the region (CMN, as 3D-Speaker's ``FBank(mean_nor=True)``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voxlane.speakers.diarize import PARTIAL_FRAMES
from voxlane.speakers.features import N_MELS

BLOCKS = ((12, 1), (24, 2), (16, 2))
"""(layers, dilation) of the three dense TDNN blocks."""
SEGMENT = 100
"""Frames of the context-aware masks' segment pooling."""
MIN_FRAMES = 50
"""A region shorter than this (0.5 s) is embedded with the frames around it, centred on it."""
BN_EPS = 1e-5


def _bn(w: dict[str, np.ndarray], name: str, affine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) of a batch norm in eval mode."""
    scale = 1.0 / np.sqrt(w[f"{name}.running_var"] + BN_EPS)
    shift = -w[f"{name}.running_mean"] * scale
    if affine:
        scale, shift = scale * w[f"{name}.weight"], shift * w[f"{name}.weight"] + w[f"{name}.bias"]
    return scale.astype(np.float32), shift.astype(np.float32)


def _affine2d(x: np.ndarray, bn: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return x * bn[0][:, None, None] + bn[1][:, None, None]


def _affine1d(x: np.ndarray, bn: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return x * bn[0][:, None] + bn[1][:, None]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def conv2d(x: np.ndarray, w: np.ndarray, stride_h: int = 1) -> np.ndarray:
    """(C, H, W) by (O, C, k, k) with padding k // 2, stride ``stride_h`` along H only."""
    k = w.shape[-1]
    if k == 1:
        return np.tensordot(w[:, :, 0, 0], x[:, ::stride_h], axes=(1, 0))
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    patches = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride_h]
    return np.tensordot(w, patches, axes=([1, 2, 3], [0, 3, 4]))


def conv1d(x: np.ndarray, w: np.ndarray, stride: int = 1, dilation: int = 1) -> np.ndarray:
    """(C, T) by (O, C, k), padding (k - 1) // 2 * dilation."""
    k = w.shape[-1]
    if k == 1:
        return w[:, :, 0] @ x
    p = (k - 1) // 2 * dilation
    xp = np.pad(x, ((0, 0), (p, p)))
    t_out = (x.shape[1] + 2 * p - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((w.shape[0], t_out), dtype=np.float32)
    for j in range(k):
        start = j * dilation
        out += w[:, :, j] @ xp[:, start : start + stride * (t_out - 1) + 1 : stride]
    return out


class CampPlusEncoder:
    feature_columns = slice(N_MELS, None)
    """Its columns of a window's features (speakers/features.py): the 80 filterbanks."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.w = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items() if v.ndim}
        w = self.w
        self.bn = {
            name.removesuffix(".running_mean"): _bn(w, name.removesuffix(".running_mean"), f"{name[:-13]}.weight" in w)
            for name in w
            if name.endswith(".running_mean")
        }
        self.dim = w["xvector.dense.linear.weight"].shape[0]
        self.growth = w["xvector.block1.tdnnd1.cam_layer.linear_local.weight"].shape[0]
        self.folded = {}
        """Each dense layer's 1x1 convolution with the batch norm after it folded in: (weight, bias)."""
        for name in w:
            if name.endswith(".linear1.weight") and ".tdnnd" in name and ".cam_layer." not in name:
                p = name.removesuffix(".linear1.weight")
                scale, shift = self.bn[f"{p}.nonlinear2.batchnorm"]
                self.folded[p] = (np.ascontiguousarray(w[name][:, :, 0] * scale[:, None]), shift[:, None].copy())

    @classmethod
    def load(cls, path: str | Path) -> CampPlusEncoder:
        with np.load(path) as npz:
            return cls({k: npz[k] for k in npz.files})

    def _block(self, x: np.ndarray, prefix: str, stride: int) -> np.ndarray:
        w, bn = self.w, self.bn
        out = _relu(_affine2d(conv2d(x, w[f"{prefix}.conv1.weight"], stride), bn[f"{prefix}.bn1"]))
        out = _affine2d(conv2d(out, w[f"{prefix}.conv2.weight"]), bn[f"{prefix}.bn2"])
        if f"{prefix}.shortcut.0.weight" in w:
            out += _affine2d(conv2d(x, w[f"{prefix}.shortcut.0.weight"], stride), bn[f"{prefix}.shortcut.1"])
        else:
            out += x
        return _relu(out)

    def embed_one(self, fbank: np.ndarray) -> np.ndarray:
        """(frames, 80) log filterbanks, mean-normalised -> the (192,) embedding, not normalised."""
        w, bn = self.w, self.bn
        x = np.ascontiguousarray(fbank.T, dtype=np.float32)[None]  # (1, 80 bands, T)
        x = _relu(_affine2d(conv2d(x, w["head.conv1.weight"]), bn["head.bn1"]))
        for layer in ("layer1", "layer2"):
            x = self._block(x, f"head.{layer}.0", 2)
            x = self._block(x, f"head.{layer}.1", 1)
        x = _relu(_affine2d(conv2d(x, w["head.conv2.weight"], 2), bn["head.bn2"]))
        x = x.reshape(-1, x.shape[-1])  # (32 channels x 10 bands, T)
        x = _relu(
            _affine1d(conv1d(x, w["xvector.tdnn.linear.weight"], stride=2), bn["xvector.tdnn.nonlinear.batchnorm"])
        )
        for b, (layers, dilation) in enumerate(BLOCKS, start=1):
            # The dense block's output grows by 32 channels a layer: one buffer, filled in place.
            width = x.shape[0]
            grown = np.empty((width + layers * self.growth, x.shape[1]), dtype=np.float32)
            grown[:width] = x
            for i in range(1, layers + 1):
                p = f"xvector.block{b}.tdnnd{i}"
                h = _relu(_affine1d(grown[:width], bn[f"{p}.nonlinear1.batchnorm"]))
                w1, b1 = self.folded[p]
                h = _relu(w1 @ h + b1)
                grown[width : width + self.growth] = self._cam(h, p, dilation)
                width += self.growth
            x = grown
            t = f"xvector.transit{b}"
            x = w[f"{t}.linear.weight"][:, :, 0] @ _relu(_affine1d(x, bn[f"{t}.nonlinear.batchnorm"]))
        x = _relu(_affine1d(x, bn["xvector.out_nonlinear.batchnorm"]))
        std = x.std(axis=1, ddof=1) if x.shape[1] > 1 else np.full(x.shape[0], 1e-2, dtype=np.float32)
        stats = np.concatenate([x.mean(axis=1), std])
        emb = w["xvector.dense.linear.weight"][:, :, 0] @ stats
        scale, shift = bn["xvector.dense.nonlinear.batchnorm"]
        return emb * scale + shift

    def _cam(self, h: np.ndarray, p: str, dilation: int) -> np.ndarray:
        """Context-aware masking: the local convolution, scaled by a mask from the region's mean plus each
        100-frame segment's."""
        w = self.w
        local = conv1d(h, w[f"{p}.cam_layer.linear_local.weight"], dilation=dilation)
        t = h.shape[1]
        n_seg = -(-t // SEGMENT)
        pad = n_seg * SEGMENT - t
        sums = np.pad(h, ((0, 0), (0, pad))).reshape(h.shape[0], n_seg, SEGMENT).sum(axis=2)
        counts = np.full(n_seg, SEGMENT, dtype=np.float32)
        counts[-1] = SEGMENT - pad
        seg = np.repeat(sums / counts, SEGMENT, axis=1)[:, :t]
        context = h.mean(axis=1, keepdims=True) + seg
        z = _relu(w[f"{p}.cam_layer.linear1.weight"][:, :, 0] @ context + w[f"{p}.cam_layer.linear1.bias"][:, None])
        z = w[f"{p}.cam_layer.linear2.weight"][:, :, 0] @ z + w[f"{p}.cam_layer.linear2.bias"][:, None]
        return local * (1.0 / (1.0 + np.exp(-z)))

    def embed_windows(
        self, windows: list[tuple[np.ndarray, list[tuple[int, int]]]]
    ) -> list[tuple[np.ndarray, list[int]]]:
        """One L2-normalised embedding per region of each window (its features: speakers/features.py), and
        each region's weight in 1.6 s partials (as GE2E's, so that clustering weighs regions alike)."""
        out = []
        for features, regions in windows:
            fbank = features[:, self.feature_columns]
            n = len(fbank)
            embeddings = np.empty((len(regions), self.dim), dtype=np.float32)
            counts = []
            for k, (a, b) in enumerate(regions):
                if b - a < MIN_FRAMES:
                    mid = (a + b) // 2
                    a, b = max(0, mid - MIN_FRAMES // 2), min(n, max(0, mid - MIN_FRAMES // 2) + MIN_FRAMES)
                part = fbank[a:b]
                part = part - part.mean(axis=0)
                e = self.embed_one(part)
                embeddings[k] = e / max(float(np.linalg.norm(e)), 1e-12)
                counts.append(max(1, round((b - a) / PARTIAL_FRAMES)))
            out.append((embeddings, counts))
        return out
