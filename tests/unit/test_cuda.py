"""--device and --compute-type: where Whisper runs, and the one line that says why CUDA cannot be used."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from voxlane.runners import cuda
from voxlane.runners.cuda import CudaUnavailable, place, preload_cublas


def fake_cuda(monkeypatch: pytest.MonkeyPatch, devices: int, cublas: str | None) -> None:
    """``devices`` GPUs; ``cublas``: where preload_cublas finds cuBLAS 12, or None for nowhere."""

    def preload() -> str:
        if cublas is None:
            raise CudaUnavailable("CTranslate2 needs cuBLAS 12 (libcublas.so.12), which is not installed; run pip")
        return cublas

    monkeypatch.setattr(cuda, "cuda_device_count", lambda: devices)
    monkeypatch.setattr(cuda, "preload_cublas", preload)


def test_cpu_is_int8_unless_told_otherwise() -> None:
    assert (place("cpu", "auto").device, place("cpu", "auto").compute_type) == ("cpu", "int8")
    assert place("cpu", "float32").compute_type == "float32"


def test_auto_without_a_gpu_runs_on_the_cpu_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, devices=0, cublas=None)
    placed = place("auto", "auto")
    assert (placed.device, placed.compute_type) == ("cpu", "int8")
    assert "no CUDA device" in placed.reason


def test_cuda_without_a_gpu_refuses_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, devices=0, cublas=None)
    with pytest.raises(CudaUnavailable, match=r"sees no CUDA device .*nvidia-smi.*--device cpu"):
        place("cuda", "auto")


def test_cuda_without_cublas_refuses_and_auto_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, devices=1, cublas=None)
    with pytest.raises(CudaUnavailable, match="cuBLAS 12"):
        place("cuda", "auto")
    fallback = place("auto", "auto")
    assert fallback.device == "cpu" and "cuBLAS 12" in fallback.reason


def test_a_gpu_with_cublas_runs_float16_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, devices=1, cublas="/site-packages/nvidia/cublas/lib")
    for device in ("cuda", "auto"):
        placed = place(device, "auto")
        assert (placed.device, placed.compute_type) == ("cuda", "float16")
        assert "/site-packages/nvidia/cublas/lib" in placed.reason
    assert place("cuda", "int8_float16").compute_type == "int8_float16"


def refuse_bare_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cuBLAS on the loader's own path (as on a machine without a CUDA 12 toolkit)."""
    real = ctypes.CDLL

    def cdll(name: str, mode: int = 0) -> ctypes.CDLL:
        if "/" not in name:
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return real(name, mode=mode)

    monkeypatch.setattr(cuda.ctypes, "CDLL", cdll)


def test_missing_cublas_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_bare_names(monkeypatch)
    monkeypatch.setattr(cuda, "_wheel_library_dirs", lambda: [])
    with pytest.raises(CudaUnavailable) as exc:
        preload_cublas()
    assert "pip install 'voxlane[cuda]'" in str(exc.value)
    assert "libcublas" in str(exc.value)


def test_a_broken_cublas_wheel_says_reinstall(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    refuse_bare_names(monkeypatch)
    for name in cuda.CUBLAS_LIBRARIES:
        (tmp_path / name).write_bytes(b"not a shared object")
    monkeypatch.setattr(cuda, "_wheel_library_dirs", lambda: [tmp_path])
    with pytest.raises(CudaUnavailable, match=r"does not load .*reinstall: pip install 'voxlane\[cuda\]'"):
        preload_cublas()


def test_the_jit_cache_goes_where_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    monkeypatch.delenv("CUDA_CACHE_MAXSIZE", raising=False)
    cuda.set_jit_cache(str(tmp_path / "jit"))
    assert (tmp_path / "jit").is_dir()
    import os

    assert os.environ["CUDA_CACHE_PATH"] == str(tmp_path / "jit")
    assert int(os.environ["CUDA_CACHE_MAXSIZE"]) == cuda.JIT_CACHE_MAX_BYTES
    monkeypatch.setenv("CUDA_CACHE_PATH", "/operator/choice")
    cuda.set_jit_cache(str(tmp_path / "other"))
    assert os.environ["CUDA_CACHE_PATH"] == "/operator/choice"
