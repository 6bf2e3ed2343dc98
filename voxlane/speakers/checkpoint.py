"""Read a PyTorch checkpoint's tensors without torch.

Resemblyzer's ``pretrained.pt`` (2019) is in torch's legacy format: five pickles and the raw storages, one
after another in one file (``torch.serialization._legacy_load``): the magic number, the protocol version, the
system info, the checkpoint object (whose tensors refer to storages by key, through ``persistent_load``), the
list of storage keys in file order; then each storage as its element count (int64, little-endian) followed by
its bytes. The newer zip format (torch 1.6 on) holds the checkpoint object as ``data.pkl`` and each storage as
``data/KEY``, raw. Only the classes a
checkpoint of tensors needs are allowed: anything else in the pickle is refused, so a file that is not what
it claims cannot run code here.
"""

from __future__ import annotations

import pickle
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C

_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class BadCheckpoint(ValueError):
    """The file is not a PyTorch checkpoint this reader understands."""


@dataclass
class _Storage:
    key: str
    dtype: type
    data: np.ndarray | None = None


@dataclass
class _TensorRef:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    def array(self) -> np.ndarray:
        data = self.storage.data
        if data is None:
            raise BadCheckpoint(f"storage {self.storage.key} was never read")
        item = data.itemsize
        return np.lib.stride_tricks.as_strided(
            data[self.offset :], shape=self.shape, strides=tuple(s * item for s in self.stride)
        ).copy()


def _rebuild_tensor(storage: _Storage, offset: int, shape: tuple[int, ...], stride: tuple[int, ...], *_: Any) -> Any:
    return _TensorRef(storage, offset, tuple(shape), tuple(stride))


class _StorageType:
    def __init__(self, name: str) -> None:
        self.dtype = _DTYPES[name]


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], storages: dict[str, _Storage]) -> None:
        super().__init__(file)
        self.storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch" and name in _DTYPES:
            return _StorageType(name)
        raise BadCheckpoint(f"the checkpoint holds {module}.{name}, which a file of tensors does not need")

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or pid[0] != "storage":
            raise BadCheckpoint(f"unexpected persistent id {pid!r}")
        storage_type, key = pid[1], str(pid[2])
        if not isinstance(storage_type, _StorageType):
            raise BadCheckpoint(f"unexpected storage type {storage_type!r}")
        return self.storages.setdefault(key, _Storage(key, storage_type.dtype))


def _arrays(obj: Any) -> Any:
    if isinstance(obj, _TensorRef):
        return obj.array()
    if isinstance(obj, dict):
        return {k: _arrays(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_arrays(v) for v in obj)
    return obj


def load(path: str | Path) -> Any:
    """The checkpoint's object with every tensor as a numpy array."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        return _load_zip(path)
    with open(path, "rb") as f:
        try:
            if _Restricted(f).load() != _LEGACY_MAGIC:
                raise BadCheckpoint(f"{path} is not a PyTorch checkpoint (wrong magic number)")
        except (pickle.UnpicklingError, EOFError) as exc:
            raise BadCheckpoint(f"{path} is not a PyTorch checkpoint: {exc}") from None
        _Restricted(f).load()  # protocol version
        _Restricted(f).load()  # system info
        storages: dict[str, _Storage] = {}
        obj = _Unpickler(f, storages).load()
        keys = _Restricted(f).load()
        for key in keys:
            storage = storages[str(key)]
            (count,) = struct.unpack("<q", f.read(8))
            itemsize = np.dtype(storage.dtype).itemsize
            storage.data = np.frombuffer(f.read(count * itemsize), dtype=storage.dtype)
    return _arrays(obj)


def _load_zip(path: Path) -> Any:
    with zipfile.ZipFile(path) as z:
        pickles = [n for n in z.namelist() if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise BadCheckpoint(f"{path} is a zip without one data.pkl: not a PyTorch checkpoint")
        root = pickles[0].removesuffix("data.pkl")
        storages: dict[str, _Storage] = {}
        try:
            with z.open(pickles[0]) as f:
                obj = _Unpickler(f, storages).load()
        except (pickle.UnpicklingError, EOFError) as exc:
            raise BadCheckpoint(f"{path} is not a PyTorch checkpoint: {exc}") from None
        for key, storage in storages.items():
            storage.data = np.frombuffer(z.read(f"{root}data/{key}"), dtype=storage.dtype)
    return _arrays(obj)


class _Restricted(pickle.Unpickler):
    """For the small pickles around the checkpoint: plain data only."""

    def find_class(self, module: str, name: str) -> Any:
        raise BadCheckpoint(f"unexpected {module}.{name} in the checkpoint's header")
