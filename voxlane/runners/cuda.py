"""Where Whisper runs: finding CUDA for CTranslate2, or saying in one line why it cannot be used.

CTranslate2's Linux wheels are built against CUDA 12 and open ``libcublas.so.12`` (and through it
``libcublasLt.so.12``) when a model first goes to the GPU; the CUDA runtime itself is linked in, and Whisper
needs no cuDNN. A machine with a recent driver often has no CUDA 12 toolkit (CUDA 13 only, or none): the
failure the field reports most (faster-whisper and speaches issues full of "libcublas.so.12 not found").
``pip install 'voxlane[cuda]'`` brings NVIDIA's ``nvidia-cublas-cu12`` wheel, and :func:`preload_cublas`
loads its libraries by path with ``RTLD_GLOBAL`` before CTranslate2 asks for them by name; a cuBLAS 12 on
the loader's path (LD_LIBRARY_PATH, ldconfig) is used as it is.

CUDA compiles the PTX of kernels built for older GPUs the first time they run on a newer one (about 19 s
for CTranslate2 on an H100): :func:`set_jit_cache` points CUDA's compute cache at a directory that outlives
the process, so the next start reads the compiled kernels back.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CUBLAS_LIBRARIES = ("libcublasLt.so.12", "libcublas.so.12")
"""What CTranslate2 4.x opens, in load order (libcublas needs libcublasLt)."""
JIT_CACHE_MAX_BYTES = 4 * 1024**3
"""CUDA_CACHE_MAXSIZE: CUDA's largest. Its default (256 MiB on recent drivers) may not hold every kernel."""
INSTALL_HINT = "pip install 'voxlane[cuda]' (or `make install-cuda`), which brings NVIDIA's nvidia-cublas-cu12 wheel"


class CudaUnavailable(RuntimeError):
    """CUDA was asked for (--device cuda) and cannot be used; the message says what is missing and the fix."""


@dataclass(frozen=True)
class Placement:
    """Where the engine runs Whisper, once ``--device`` and ``--compute-type`` are resolved."""

    device: str
    """'cpu' or 'cuda'."""
    compute_type: str
    reason: str
    """Why, for the engine's start-up log line ("--device auto: no CUDA device", ...)."""


def _wheel_library_dirs() -> list[Path]:
    """``nvidia/cublas/lib`` of the nvidia-cublas-cu12 wheel wherever ``nvidia.cublas`` is installed."""
    try:
        spec = importlib.util.find_spec("nvidia.cublas")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) / "lib" for p in spec.submodule_search_locations if (Path(p) / "lib").is_dir()]


def preload_cublas() -> str:
    """Load cuBLAS 12 so that CTranslate2 finds it; returns where it came from. Raises CudaUnavailable."""
    try:  # the loader's own search first: a system CUDA 12, or LD_LIBRARY_PATH
        for name in CUBLAS_LIBRARIES:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        return "the system's library path"
    except OSError as exc:
        system_error = str(exc)
    for lib_dir in _wheel_library_dirs():
        paths = [lib_dir / name for name in CUBLAS_LIBRARIES]
        if all(p.is_file() for p in paths):
            try:
                for p in paths:
                    ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                raise CudaUnavailable(
                    f"cuBLAS 12 in {lib_dir} does not load ({exc}); reinstall: {INSTALL_HINT}"
                ) from exc
            return str(lib_dir)
    raise CudaUnavailable(
        f"CTranslate2 needs cuBLAS 12 (libcublas.so.12), which is not installed ({system_error}); "
        f"run {INSTALL_HINT}, or add a CUDA 12 toolkit's lib64 to LD_LIBRARY_PATH"
    )


def set_jit_cache(cache_dir: str) -> None:
    """Point CUDA's JIT cache at ``cache_dir`` (before the first CUDA call of this process). Variables the
    operator set are left alone."""
    if not cache_dir:
        return
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CUDA_CACHE_PATH", cache_dir)
    os.environ.setdefault("CUDA_CACHE_MAXSIZE", str(JIT_CACHE_MAX_BYTES))


def cuda_device_count() -> int:
    import ctranslate2

    try:
        return int(ctranslate2.get_cuda_device_count())
    except Exception:  # a driver that fails to initialise counts as none
        return 0


def place(device: str, compute_type: str) -> Placement:
    """Resolve ``--device`` (cpu, cuda, auto) and ``--compute-type`` (auto: float16 on CUDA, int8 on CPU).

    ``cuda`` raises CudaUnavailable when there is no GPU or no cuBLAS 12; ``auto`` then falls back to the CPU
    and says why."""
    if device == "cpu":
        return Placement("cpu", "int8" if compute_type == "auto" else compute_type, "--device cpu")
    count = cuda_device_count()
    if count == 0:
        if device == "cuda":
            raise CudaUnavailable(
                "--device cuda: CTranslate2 sees no CUDA device (no NVIDIA GPU, or its driver is not loaded: "
                "check nvidia-smi); run with --device cpu"
            )
        return Placement("cpu", "int8" if compute_type == "auto" else compute_type, "--device auto: no CUDA device")
    try:
        source = preload_cublas()
    except CudaUnavailable as exc:
        if device == "cuda":
            raise
        return Placement("cpu", "int8" if compute_type == "auto" else compute_type, f"--device auto: {exc}")
    return Placement(
        "cuda",
        "float16" if compute_type == "auto" else compute_type,
        f"--device {device}: {count} CUDA device(s), cuBLAS 12 from {source}",
    )
