#!/usr/bin/env python3
"""What a Whisper encoder pass costs, and where its time goes (docs/asr-engine.md, sixth round).

Three measurements on the bundled tiny.en (or --model DIR), best of --reps, with malloc set as the engine
process sets it (voxlane/heap.py keep_freed_memory; --glibc-defaults leaves glibc's, where CTranslate2's
large buffers fault their pages in on every pass):

- ``widths``: CTranslate2's int8 encoder for a batch of B windows of T frames (30 s = 3000 frames; a short
  window 1300, a live final 1800), the way `WhisperRunner` calls it.
- ``onednn``: one 30 s encode with ONEDNN_VERBOSE=1 in a child process, oneDNN's own time summed by primitive
  and shape (on CPUs where CTranslate2 picks oneDNN: not GenuineIntel). The attention's float32 products
  (1500x64 by 64x1500, and 1500x1500 by 1500x64, once per head and layer) are most of it.
- ``onnx``: the same encoder rebuilt as an ONNX Runtime graph from the model's own weights (model.bin read
  directly: float16 tensors, CTranslate2's binary layout), float32 and with 8-bit weights (MatMulNBits,
  blocks of 32, int8 compute), fused attention (com.microsoft MultiHeadAttention). Prints each one's time
  beside CTranslate2's, alone and with two workers at once, and its mean distance from CTranslate2's
  float32 encoder (CTranslate2's own int8 for reference). Needs the `onnx` package (not a voxlane
  dependency): ``.venv/bin/pip install onnx``.

    .venv/bin/python benchmarks/encoder_cost.py widths
    .venv/bin/python benchmarks/encoder_cost.py onednn
    .venv/bin/python benchmarks/encoder_cost.py onnx
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import ctranslate2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from voxlane.config import default_model_path  # noqa: E402
from voxlane.heap import keep_freed_memory  # noqa: E402

_DTYPES = (np.float32, np.int8, np.int16, np.int32, np.float16)


def read_ct2(path: Path) -> dict[str, np.ndarray]:
    """The variables of a CTranslate2 model.bin (binary version 6: name, revision, then each variable's name,
    rank, dims, dtype id, byte count and bytes; aliases last)."""
    data = path.read_bytes()
    at = 0

    def take(fmt: str) -> int:
        nonlocal at
        (value,) = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return int(value)

    def string() -> str:
        nonlocal at
        n = take("H")
        text = data[at : at + n - 1].decode()
        at += n
        return text

    take("I")
    string()
    take("I")
    variables = {}
    for _ in range(take("I")):
        name = string()
        shape = [take("I") for _ in range(take("B"))]
        dtype = _DTYPES[take("B")]
        size = take("I")
        variables[name] = np.frombuffer(data, dtype, size // np.dtype(dtype).itemsize, at).reshape(shape)
        at += size
    return variables


def onnx_encoder(variables: dict[str, np.ndarray], eight_bit: bool) -> bytes:
    """Whisper's encoder as an ONNX graph: two convolutions with GELU, sinusoidal positions sliced to the
    input's length (short windows), pre-norm layers with fused attention, a final layer norm."""
    from onnx import TensorProto, helper, numpy_helper

    inits: list = []
    nodes: list = []
    count = [0]

    def name(prefix: str) -> str:
        count[0] += 1
        return f"{prefix}{count[0]}"

    def const(key: str, value: np.ndarray | None = None) -> str:
        array = np.asarray(variables[key] if value is None else value)
        if array.dtype == np.float16:
            array = array.astype(np.float32)
        inits.append(numpy_helper.from_array(array, key))
        return key

    def node(op: str, inputs: list[str], **attrs: object) -> str:
        out = name(op)
        domain = "com.microsoft" if op in ("Gelu", "MultiHeadAttention", "MatMulNBits") else ""
        nodes.append(helper.make_node(op, inputs, [out], domain=domain, **attrs))
        return out

    def linear(x: str, key: str) -> str:
        weight = np.asarray(variables[key + "/weight"], np.float32)  # (N, K)
        if eight_bit:
            n, k = weight.shape
            blocks = weight.reshape(n, k // 32, 32)
            scale = np.maximum(np.abs(blocks).max(axis=2), 1e-8) / 127.0
            packed = (np.clip(np.round(blocks / scale[:, :, None]), -127, 127) + 128).astype(np.uint8)
            out = node(
                "MatMulNBits",
                [x, const(key + "/q", packed), const(key + "/s", scale.reshape(-1).astype(np.float32))],
                K=k, N=n, bits=8, block_size=32, accuracy_level=4,
            )  # fmt: skip
        else:
            out = node("MatMul", [x, const(key + "/t", weight.T.copy())])
        return node("Add", [out, const(key + "/bias")])

    def norm(x: str, key: str) -> str:
        return node("LayerNormalization", [x, const(key + "/gamma"), const(key + "/beta")], axis=-1, epsilon=1e-5)

    heads = int(variables["encoder/num_heads"])
    layers = sum(1 for k in variables if k.startswith("encoder/layer_") and k.endswith("ffn/linear_1/bias"))
    h = node("Conv", ["mel", const("encoder/conv1/weight"), const("encoder/conv1/bias")], pads=[1, 1])
    h = node("Gelu", [h])
    h = node("Conv", [h, const("encoder/conv2/weight"), const("encoder/conv2/bias")], pads=[1, 1], strides=[2])
    h = node("Transpose", [node("Gelu", [h])], perm=[0, 2, 1])
    zero = const("zero", np.array([0], np.int64))
    length = node("Shape", [h], start=1, end=2)
    h = node("Add", [h, node("Slice", [const("encoder/position_encodings/encodings"), zero, length, zero])])
    for i in range(layers):
        key = f"encoder/layer_{i}"
        qkv = linear(norm(h, key + "/self_attention/layer_norm"), key + "/self_attention/linear_0")
        q, k, v = name("q"), name("k"), name("v")
        nodes.append(helper.make_node("Split", [qkv], [q, k, v], axis=-1, num_outputs=3))
        attention = node("MultiHeadAttention", [q, k, v], num_heads=heads)
        h = node("Add", [h, linear(attention, key + "/self_attention/linear_1")])
        ffn = node("Gelu", [linear(norm(h, key + "/ffn/layer_norm"), key + "/ffn/linear_0")])
        h = node("Add", [h, linear(ffn, key + "/ffn/linear_1")])
    out = norm(h, "encoder/layer_norm")
    d_model, n_mels = variables["encoder/conv1/weight"].shape[:2]
    graph = helper.make_graph(
        nodes,
        "whisper_encoder",
        [helper.make_tensor_value_info("mel", TensorProto.FLOAT, ["B", n_mels, "T"])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["B", "P", d_model])],
        inits,
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def best_ms(call: Callable[[], object], reps: int) -> float:
    call()
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def two_workers(calls: list[Callable[[], object]], rows: int, rounds: int = 3) -> float:
    """Windows a second with the two calls running side by side (two engine workers)."""
    for call in calls:
        call()
    threads = [threading.Thread(target=lambda c=c: [c() for _ in range(rounds)]) for c in calls]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(calls) * rounds * rows / (time.perf_counter() - started)


def ct2_encoder(model: Path, compute_type: str, threads: int) -> ctranslate2.models.Whisper:
    return ctranslate2.models.Whisper(str(model), device="cpu", compute_type=compute_type, intra_threads=threads)


def widths(model: Path, reps: int) -> None:
    encoder = ct2_encoder(model, "int8", 2)
    rng = np.random.default_rng(0)
    for batch, frames in ((1, 3000), (8, 3000), (1, 1300), (4, 1300), (1, 1800), (2, 1800), (3, 1800), (4, 1800)):
        x = ctranslate2.StorageView.from_array(rng.standard_normal((batch, 80, frames)).astype(np.float32))
        print(f"batch {batch} x {frames} frames: {best_ms(lambda x=x: encoder.encode(x), reps):.0f} ms", flush=True)


def onednn(model: Path, glibc_defaults: bool) -> None:
    child = (
        "import sys, numpy as np, ctranslate2\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from voxlane.heap import keep_freed_memory\n"
        f"{'' if glibc_defaults else 'keep_freed_memory()'}\n"
        f"m = ctranslate2.models.Whisper({str(model)!r}, device='cpu', compute_type='int8', intra_threads=2)\n"
        "x = ctranslate2.StorageView.from_array(np.zeros((1, 80, 3000), np.float32))\n"
        "m.encode(x); m.encode(x)\n"
        "print('MARK', flush=True)\n"
        "m.encode(x)\n"
    )
    env = dict(os.environ, ONEDNN_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True).stdout
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for line in out.split("MARK", 1)[-1].splitlines():
        fields = line.split(",")
        if line.startswith("onednn_verbose,exec") and len(fields) > 3:
            key = (fields[3], fields[-2])
            totals[key][0] += 1
            totals[key][1] += float(fields[-1])
    if not totals:
        print("no oneDNN primitives ran: CTranslate2 uses another backend on this CPU")
        return
    print(f"oneDNN time in one 30 s encode: {sum(t for _, t in totals.values()):.1f} ms")
    for (kind, shape), (calls, ms) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"  {ms:7.1f} ms  {int(calls):3d} x {kind} {shape}")


def onnx_runtime(model: Path, reps: int) -> None:
    import onnxruntime as ort

    variables = read_ct2(model / "model.bin")

    def session(graph: bytes, threads: int) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    graphs = {"onnx float32": onnx_encoder(variables, False), "onnx 8-bit": onnx_encoder(variables, True)}
    ct2_int8 = ct2_encoder(model, "int8", 2)
    rng = np.random.default_rng(0)
    reference = ct2_encoder(model, "float32", 2)
    features = rng.standard_normal((2, 80, 3000)).astype(np.float32)
    exact = np.asarray(reference.encode(ctranslate2.StorageView.from_array(features), to_cpu=True))
    ours = np.asarray(ct2_int8.encode(ctranslate2.StorageView.from_array(features), to_cpu=True))
    print(f"mean |difference| from CTranslate2 float32: ctranslate2 int8 {np.abs(ours - exact).mean():.4f}", end="")
    sessions = {label: session(graph, 2) for label, graph in graphs.items()}
    for label, s in sessions.items():
        print(f", {label} {np.abs(s.run(None, {'mel': features})[0] - exact).mean():.4f}", end="")
    print()
    for batch, frames in ((1, 3000), (8, 3000), (1, 1300), (4, 1300), (1, 1800)):
        x = rng.standard_normal((batch, 80, frames)).astype(np.float32)
        view = ctranslate2.StorageView.from_array(x)
        row = [f"ctranslate2 int8 {best_ms(lambda view=view: ct2_int8.encode(view), reps):.0f} ms"]
        row += [
            f"{label} {best_ms(lambda s=s, x=x: s.run(None, {'mel': x}), reps):.0f} ms" for label, s in sessions.items()
        ]
        print(f"batch {batch} x {frames} frames: " + ", ".join(row), flush=True)
    x = rng.standard_normal((8, 80, 3000)).astype(np.float32)
    view = ctranslate2.StorageView.from_array(x)
    pair = [ct2_encoder(model, "int8", 2) for _ in range(2)]
    rates = [f"ctranslate2 int8 {two_workers([lambda m=m: m.encode(view) for m in pair], 8):.1f}"]
    for label, graph in graphs.items():
        both = [session(graph, 2) for _ in range(2)]
        rates.append(f"{label} {two_workers([lambda s=s: s.run(None, {'mel': x}) for s in both], 8):.1f}")
    print("two workers, batches of 8 x 30 s, windows a second: " + ", ".join(rates))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("widths", "onednn", "onnx"))
    parser.add_argument("--model", type=Path, default=None, help="a CTranslate2 Whisper directory (default: bundled)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--glibc-defaults", action="store_true", help="leave malloc as glibc sets it (the engine keeps freed memory)"
    )
    args = parser.parse_args()
    if not args.glibc_defaults:
        keep_freed_memory()  # as the engine process does first thing (docs/engine-config.md)
    model = args.model or Path(default_model_path())
    if args.what == "widths":
        widths(model, args.reps)
    elif args.what == "onednn":
        onednn(model, args.glibc_defaults)
    else:
        onnx_runtime(model, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
