"""The CAM++ speaker encoder (3D-Speaker's ``CAMPPlus``: a 2D-convolutional front end over 80 filterbanks,
then densely connected TDNN blocks with context-aware masking, statistics pooling and a 192-dim layer) in
inference form: each batch norm a scale and a shift. Weights: the ``campplus_cn_en_common`` checkpoint
(Apache-2.0, 3D-Speaker), converted at install time (voxlane/speakers/weights.py). No torch.

The network is written twice. In numpy (``embed_one_numpy``), piece by piece against torch's documented
semantics (tests/unit/test_campplus.py); and as an ONNX graph built from the same weights at load
(``campplus_graph``), which serves: onnxruntime's convolutions take half the CPU of numpy's tensor products
over sliding windows (docs/diarization.md), and the tests hold the two to the same embeddings.

Each speech region is embedded whole (CAM++ pools over any length), from its filterbanks minus their mean
over the region (CMN, as 3D-Speaker's ``FBank(mean_nor=True)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

    def __init__(self, weights: dict[str, np.ndarray], threads: int = 1) -> None:
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

        # Here, not at import: it loads onnxruntime, and the API process imports this module for its types.
        from voxlane.runners.piper import cpu_session

        self.session = cpu_session(campplus_graph(self), threads)

    @classmethod
    def load(cls, path: str | Path, threads: int = 1) -> CampPlusEncoder:
        with np.load(path) as npz:
            return cls({k: npz[k] for k in npz.files}, threads)

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
        """(frames, 80) log filterbanks, mean-normalised -> the (192,) embedding, not normalised: the graph
        up to the last frame-level layer, then the statistics pooling and the dense layer in numpy."""
        k = self.w["xvector.tdnn.linear.weight"].shape[-1]
        segments, expand = segment_pooling((len(fbank) + 2 * ((k - 1) // 2) - k) // 2 + 1)  # the TDNN's stride 2
        x = np.ascontiguousarray(fbank.T, dtype=np.float32)[None, None]
        (frames,) = self.session.run(None, {"x": x, "segments": segments, "expand": expand})
        return self._pooled(frames[0])

    def _pooled(self, x: np.ndarray) -> np.ndarray:
        """Statistics pooling of the (channels, frames) output, then the dense layer and its batch norm."""
        std = x.std(axis=1, ddof=1) if x.shape[1] > 1 else np.full(x.shape[0], 1e-2, dtype=np.float32)
        stats = np.concatenate([x.mean(axis=1), std])
        emb = self.w["xvector.dense.linear.weight"][:, :, 0] @ stats
        scale, shift = self.bn["xvector.dense.nonlinear.batchnorm"]
        return emb * scale + shift

    def embed_one_numpy(self, fbank: np.ndarray) -> np.ndarray:
        """``embed_one`` in numpy: the reference the graph is checked against."""
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
        return self._pooled(_relu(_affine1d(x, bn["xvector.out_nonlinear.batchnorm"])))

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


def segment_pooling(frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The context masks' segment pooling as two matrices: (frames, n) whose column averages one 100-frame
    segment over its own frames (the last one over fewer, as torch's ``avg_pool1d(ceil_mode=True)``), and
    (n, frames) that hands each segment's value back to its frames."""
    n = -(-frames // SEGMENT)
    segment = np.arange(frames) // SEGMENT
    sizes = np.bincount(segment, minlength=n).astype(np.float32)
    averaging = np.zeros((frames, n), dtype=np.float32)
    averaging[np.arange(frames), segment] = 1.0 / sizes[segment]
    expand = np.zeros((n, frames), dtype=np.float32)
    expand[segment, np.arange(frames)] = 1.0
    return averaging, expand


def campplus_graph(enc: CampPlusEncoder) -> bytes:
    """CAM++ up to its statistics pooling as an ONNX graph: inputs ``x`` (1, 1, 80, T) filterbanks,
    ``segments`` (T2, n) each 100-frame segment's averaging column and ``expand`` (n, T2) each frame's
    segment; output ``y`` (1, C, T2), the frames pooled by the caller."""
    from onnx import TensorProto, helper, numpy_helper

    w, bn = enc.w, enc.bn
    nodes: list[Any] = []
    tensors: list[Any] = []
    count = [0]

    def const(a: np.ndarray) -> str:
        count[0] += 1
        name = f"w_{count[0]}"
        tensors.append(numpy_helper.from_array(np.ascontiguousarray(a, dtype=np.float32), name))
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        count[0] += 1
        out = f"{kind.lower()}_{count[0]}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def affine(x: str, name: str, dims: int) -> str:
        scale, shift = bn[name]
        if dims == 1:
            # One pass over the dense blocks' growing activations instead of a Mul's and an Add's: 4% of the
            # encoder's CPU. Mean 0 and variance 1 with epsilon 0 leave the scale and shift as they are.
            stats = (const(np.zeros_like(scale)), const(np.ones_like(scale)))
            return op("BatchNormalization", [x, const(scale), const(shift), *stats], epsilon=0.0)
        shape = (-1,) + (1,) * dims
        return op("Add", [op("Mul", [x, const(scale.reshape(shape))]), const(shift.reshape(shape))])

    def relu(x: str) -> str:
        return op("Relu", [x])

    def linear(x: str, weight: np.ndarray, bias: np.ndarray) -> str:
        """(out, in) by the (1, in, frames) activations, plus a bias per output channel."""
        return op("Add", [op("MatMul", [const(weight), x]), const(bias[:, None])])

    def conv2d(x: str, weight: np.ndarray, stride: int = 1) -> str:
        k = weight.shape[-1]
        return op("Conv", [x, const(weight)], kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, 1])

    def conv1d(x: str, weight: np.ndarray, stride: int = 1, dilation: int = 1) -> str:
        k = weight.shape[-1]
        p = (k - 1) // 2 * dilation
        return op("Conv", [x, const(weight)], kernel_shape=[k], pads=[p, p], strides=[stride], dilations=[dilation])

    def block(x: str, prefix: str, stride: int) -> str:
        out = relu(affine(conv2d(x, w[f"{prefix}.conv1.weight"], stride), f"{prefix}.bn1", 2))
        out = affine(conv2d(out, w[f"{prefix}.conv2.weight"]), f"{prefix}.bn2", 2)
        if f"{prefix}.shortcut.0.weight" in w:
            short = affine(conv2d(x, w[f"{prefix}.shortcut.0.weight"], stride), f"{prefix}.shortcut.1", 2)
        else:
            short = x
        return relu(op("Add", [out, short]))

    x = relu(affine(conv2d("x", w["head.conv1.weight"]), "head.bn1", 2))
    for layer in ("layer1", "layer2"):
        x = block(x, f"head.{layer}.0", 2)
        x = block(x, f"head.{layer}.1", 1)
    x = relu(affine(conv2d(x, w["head.conv2.weight"], 2), "head.bn2", 2))
    flat = np.array([1, w["xvector.tdnn.linear.weight"].shape[1], -1], np.int64)
    tensors.append(numpy_helper.from_array(flat, "flat"))
    x = op("Reshape", [x, "flat"])
    x = relu(affine(conv1d(x, w["xvector.tdnn.linear.weight"], stride=2), "xvector.tdnn.nonlinear.batchnorm", 1))
    for b, (layers, dilation) in enumerate(BLOCKS, start=1):
        for i in range(1, layers + 1):
            p = f"xvector.block{b}.tdnnd{i}"
            h = relu(affine(x, f"{p}.nonlinear1.batchnorm", 1))
            w1, b1 = enc.folded[p]
            h = relu(linear(h, w1, b1[:, 0]))
            local = conv1d(h, w[f"{p}.cam_layer.linear_local.weight"], dilation=dilation)
            context = op("Add", [op("MatMul", [h, "segments"]), op("ReduceMean", [h, "time"], keepdims=1)])
            z = relu(linear(context, w[f"{p}.cam_layer.linear1.weight"][:, :, 0], w[f"{p}.cam_layer.linear1.bias"]))
            z = linear(z, w[f"{p}.cam_layer.linear2.weight"][:, :, 0], w[f"{p}.cam_layer.linear2.bias"])
            gate = op("MatMul", [op("Sigmoid", [z]), "expand"])
            x = op("Concat", [x, op("Mul", [local, gate])], axis=1)
        t = f"xvector.transit{b}"
        x = op("MatMul", [const(w[f"{t}.linear.weight"][:, :, 0]), relu(affine(x, f"{t}.nonlinear.batchnorm", 1))])
    x = relu(affine(x, "xvector.out_nonlinear.batchnorm", 1))
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    tensors.append(numpy_helper.from_array(np.array([2], np.int64), "time"))
    graph = helper.make_graph(
        nodes,
        "campplus",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 80, "frames"]),
            helper.make_tensor_value_info("segments", TensorProto.FLOAT, ["t2", "n"]),
            helper.make_tensor_value_info("expand", TensorProto.FLOAT, ["n", "t2"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "channels", "t2"])],
        tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
