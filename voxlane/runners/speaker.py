"""The speaker encoder: Resemblyzer's GE2E network (3 LSTM layers of 256 over 40 mel bands, a linear layer
of 256 with ReLU, L2-normalised) on weights converted from its checkpoint at install time
(voxlane/speakers/weights.py). It embeds partial utterances of 1.6 s (160 frames of 10 ms), many at once.
The LSTM runs as onnxruntime's LSTM operator, on a graph built from the weights at load: its vectorised
gates cost half the CPU of a numpy loop, whose float32 tanh was half of each step (docs/diarization.md). The
linear layer is numpy's."""

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


def _onnx_gates(torch_weights: np.ndarray) -> np.ndarray:
    """A torch LSTM tensor's gate blocks (i, f, g, o along its first axis) in ONNX's order (i, o, f, c)."""
    i, f, g, o = np.split(torch_weights, 4)
    return np.concatenate([i, o, f, g]).astype(np.float32)


def lstm_graph(weights: dict[str, np.ndarray], layers: int = 3) -> bytes:
    """An ONNX model of the checkpoint's stacked LSTM: input ``x`` (frames, batch, inputs), output ``h`` the
    last layer's final hidden state (batch, hidden)."""
    from onnx import TensorProto, helper, numpy_helper

    hidden = weights["lstm.weight_hh_l0"].shape[1]
    inputs = weights["lstm.weight_ih_l0"].shape[1]
    nodes = []
    tensors = [
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
    ]
    x = "x"
    for k in range(layers):
        w = _onnx_gates(weights[f"lstm.weight_ih_l{k}"])[None]
        r = _onnx_gates(weights[f"lstm.weight_hh_l{k}"])[None]
        b = np.concatenate([_onnx_gates(weights[f"lstm.bias_ih_l{k}"]), _onnx_gates(weights[f"lstm.bias_hh_l{k}"])])
        tensors += [
            numpy_helper.from_array(w, f"w{k}"),
            numpy_helper.from_array(r, f"r{k}"),
            numpy_helper.from_array(b[None], f"b{k}"),
        ]
        nodes.append(helper.make_node("LSTM", [x, f"w{k}", f"r{k}", f"b{k}"], [f"y{k}", f"h{k}"], hidden_size=hidden))
        nodes.append(helper.make_node("Squeeze", [f"y{k}", "axis1"], [f"x{k}"]))  # drop the direction axis
        x = f"x{k}"
    nodes.append(helper.make_node("Squeeze", [f"h{layers - 1}", "axis0"], ["h"]))
    graph = helper.make_graph(
        nodes,
        "ge2e_lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["frames", "batch", inputs])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", hidden])],
        tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


class SpeakerEncoder:
    def __init__(self, weights: dict[str, np.ndarray], threads: int = 1) -> None:
        # Here, not at import: it loads onnxruntime, and the API process imports this module for its types.
        from voxlane.runners.piper import cpu_session

        self.session = cpu_session(lstm_graph(weights), threads)
        self.linear_w = np.ascontiguousarray(weights["linear.weight"].T, dtype=np.float32)
        self.linear_b = weights["linear.bias"].astype(np.float32)
        self.hidden = weights["lstm.weight_hh_l0"].shape[1]
        self.dim = self.linear_w.shape[1]

    @classmethod
    def load(cls, path: str | Path, threads: int = 1) -> SpeakerEncoder:
        with np.load(path) as npz:
            return cls({k: npz[k] for k in npz.files}, threads)

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
        """(batch, frames, 40) mel power -> (batch, 256) L2-normalised embeddings (tests/unit/test_speaker_encoder.py
        holds torch's LSTM, written plainly, to check them against)."""
        x = np.ascontiguousarray(np.swapaxes(np.asarray(mels, dtype=np.float32), 0, 1))
        (h,) = self.session.run(None, {"x": x})
        raw = np.maximum(h @ self.linear_w + self.linear_b, 0.0)
        norm = np.linalg.norm(raw, axis=1, keepdims=True)
        return raw / np.maximum(norm, 1e-12)


def load_encoder(path: str | Path, threads: int = 1) -> Any:
    """The encoder whose weights ``path`` (.npz) holds: GE2E's LSTM or CAM++ (runners/campplus.py). Each runs
    on ``threads`` of onnxruntime's."""
    with np.load(path) as npz:
        weights = {k: npz[k] for k in npz.files}
    if "xvector.dense.linear.weight" in weights:
        from voxlane.runners.campplus import CampPlusEncoder

        return CampPlusEncoder(weights, threads)
    return SpeakerEncoder(weights, threads)
