"""--device cuda or --tts-device cuda where CUDA cannot be used: the server refuses to start, with one line
that says what is missing and what to do. (Every other e2e test runs on the defaults, --device auto and
--tts-device auto, which are the CPU on a machine without a GPU; Whisper on a GPU itself:
tests/models/test_cuda_runner.py.)"""

from __future__ import annotations

import onnxruntime
import pytest

from tests.conftest import ServerProcess
from voxlane.runners.cuda import cuda_device_count


def _refused_start(*flags: str) -> str:
    """The log of a server started with ``flags`` that exited with an error."""
    srv = ServerProcess(*flags)
    try:
        assert srv.proc.wait(120) != 0
        return srv.log()
    finally:
        srv.stop()


@pytest.mark.skipif(cuda_device_count() > 0, reason="this machine has a CUDA device")
def test_device_cuda_without_a_gpu_refuses_to_start_and_says_why() -> None:
    log = _refused_start("--device", "cuda")
    reason = (
        "--device cuda: CTranslate2 sees no CUDA device (no NVIDIA GPU, or its driver is not loaded: check "
        "nvidia-smi); run with --device cpu"
    )
    assert f"ERROR voxlane.server.app: voxlane cannot start: {reason}\n" in log, log
    assert "Traceback" not in log, log  # neither the engine nor uvicorn buries the line under one


@pytest.mark.skipif(
    "CUDAExecutionProvider" in onnxruntime.get_available_providers(), reason="onnxruntime has the CUDA provider"
)
def test_tts_device_cuda_without_onnxruntime_s_cuda_provider_refuses_to_start_and_says_why() -> None:
    log = _refused_start("--tts-device", "cuda")
    line = next((x for x in log.splitlines() if "voxlane cannot start:" in x), "")
    assert "ERROR voxlane.server.app: voxlane cannot start: --tts-device cuda: onnxruntime " in line, log
    assert "has no CUDA provider" in line and line.endswith("or run with --tts-device cpu"), line
    assert "Traceback" not in log, log
