"""The torch-free reader of PyTorch's legacy checkpoints (voxlane/speakers/checkpoint.py), on files written
here the way ``torch.save(..., _use_new_zipfile_serialization=False)`` writes them, without torch: the
pickles name ``torch._utils._rebuild_tensor_v2`` and ``torch.FloatStorage``, so stand-ins of those are put
in ``sys.modules`` while the file is written (the reader never imports them)."""

from __future__ import annotations

import io
import pickle
import struct
import sys
import types
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxlane.speakers.checkpoint import _LEGACY_MAGIC, BadCheckpoint, load

_STORAGE_NAMES = {np.dtype(np.float32): "FloatStorage", np.dtype(np.int64): "LongStorage"}


class _Storage:
    def __init__(self, key: str, data: np.ndarray) -> None:
        self.key, self.data = key, data


class _Tensor:
    """A view of a storage, pickled as torch pickles a tensor."""

    def __init__(self, storage: _Storage, offset: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self.args: tuple[Any, ...] = (storage, offset, shape, stride, False, OrderedDict())

    def __reduce__(self) -> tuple[Any, ...]:
        return (sys.modules["torch._utils"]._rebuild_tensor_v2, self.args)


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args: Any) -> None: ...

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2  # type: ignore[attr-defined]
    for name in _STORAGE_NAMES.values():
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", utils)
    return torch


def write_legacy(path: Path, obj: Any, storages: list[_Storage], torch: types.ModuleType) -> None:
    class Pickler(pickle.Pickler):
        def persistent_id(self, o: Any) -> Any:
            if isinstance(o, _Storage):
                storage_type = getattr(torch, _STORAGE_NAMES[o.data.dtype])
                return ("storage", storage_type, o.key, "cpu", len(o.data), None)
            return None

    body = io.BytesIO()
    for header in (_LEGACY_MAGIC, 1001, {"protocol_version": 1001, "little_endian": True}):
        pickle.dump(header, body, protocol=2)
    Pickler(body, protocol=2).dump(obj)
    pickle.dump([s.key for s in storages], body, protocol=2)
    for s in storages:
        body.write(struct.pack("<q", len(s.data)) + s.data.tobytes())
    path.write_bytes(body.getvalue())


def test_tensors_come_back_with_their_shapes_strides_offsets_and_types(
    tmp_path: Path, fake_torch: types.ModuleType
) -> None:
    weights = np.arange(12, dtype=np.float32) * 0.5
    steps = np.array([7, -3, 2**40], dtype=np.int64)
    a, b = _Storage("0", weights), _Storage("1", steps)
    state = OrderedDict(
        [
            ("linear.weight", _Tensor(a, 0, (3, 4), (4, 1))),
            ("linear.weight_t", _Tensor(a, 0, (4, 3), (1, 4))),  # a transposed view of the same storage
            ("linear.bias", _Tensor(a, 8, (4,), (1,))),  # an offset into it
            ("step", _Tensor(b, 0, (3,), (1,))),
        ]
    )
    path = tmp_path / "pretrained.pt"
    write_legacy(path, {"model_state": state, "step": 5}, [a, b], fake_torch)

    out = load(path)
    assert out["step"] == 5
    got = out["model_state"]
    assert list(got) == ["linear.weight", "linear.weight_t", "linear.bias", "step"]
    np.testing.assert_array_equal(got["linear.weight"], weights.reshape(3, 4))
    np.testing.assert_array_equal(got["linear.weight_t"], weights.reshape(3, 4).T)
    np.testing.assert_array_equal(got["linear.bias"], weights[8:12])
    np.testing.assert_array_equal(got["step"], steps)
    assert got["linear.weight"].dtype == np.float32 and got["step"].dtype == np.int64


class _RunsCode:
    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.getcwd, ())


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path: Path, fake_torch: types.ModuleType) -> None:
    path = tmp_path / "evil.pt"
    write_legacy(path, {"model_state": _RunsCode()}, [], fake_torch)
    with pytest.raises(BadCheckpoint, match="getcwd"):
        load(path)


def test_a_file_that_is_not_a_legacy_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.pt"
    path.write_bytes(pickle.dumps(12345, protocol=2) + b"rest")
    with pytest.raises(BadCheckpoint, match="magic"):
        load(path)
    path.write_bytes(b"PK\x03\x04 not a pickle")
    with pytest.raises(BadCheckpoint):
        load(path)


def test_the_zip_format_is_read_too(tmp_path: Path, fake_torch: types.ModuleType) -> None:
    # torch.save's default since 1.6: the object as archive/data.pkl, each storage raw as archive/data/KEY
    weights = np.arange(12, dtype=np.float32) * 0.25
    a, b = _Storage("0", weights), _Storage("1", np.array([3, 4], dtype=np.int64))
    state = OrderedDict(
        [
            ("head.conv.weight", _Tensor(a, 0, (2, 3), (3, 1))),
            ("head.bn.bias", _Tensor(a, 6, (3, 2), (1, 3))),  # an offset and a transposed stride
            ("head.bn.num_batches_tracked", _Tensor(b, 1, (), ())),
        ]
    )

    class Pickler(pickle.Pickler):
        def persistent_id(self, o: Any) -> Any:
            if isinstance(o, _Storage):
                storage_type = getattr(fake_torch, _STORAGE_NAMES[o.data.dtype])
                return ("storage", storage_type, o.key, "cpu", len(o.data))
            return None

    body = io.BytesIO()
    Pickler(body, protocol=2).dump(state)
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("model/data.pkl", body.getvalue())
        for s in (a, b):
            z.writestr(f"model/data/{s.key}", s.data.tobytes())
    got = load(path)
    assert list(got) == list(state)
    np.testing.assert_array_equal(got["head.conv.weight"], weights[:6].reshape(2, 3))
    np.testing.assert_array_equal(got["head.bn.bias"], weights[6:12].reshape(2, 3).T)
    assert got["head.bn.num_batches_tracked"] == 4 and got["head.bn.num_batches_tracked"].dtype == np.int64
