"""--tts-device: where the Piper voices run, and the one line that says why the GPU cannot be used. This
machine's onnxruntime has no CUDA provider (CI's neither); the GPU itself is measured in docs/gpu.md."""

from __future__ import annotations

from typing import Any

import onnxruntime
import pytest

from voxlane.config.resolve import default_voice_paths
from voxlane.runners import piper
from voxlane.runners.cuda import CudaUnavailable
from voxlane.runners.piper import PiperRunner, place_voices, voice_session


def test_cpu_is_cpu_without_looking_for_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(piper, "cuda_voice_problem", lambda: pytest.fail("--tts-device cpu looked for a GPU"))
    assert place_voices("cpu", "cuda") == ("cpu", "--tts-device cpu")


def test_auto_keeps_the_voices_on_the_cpu_where_whisper_runs_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(piper, "cuda_voice_problem", lambda: None)  # even where onnxruntime could use a GPU
    assert place_voices("auto", "cpu") == ("cpu", "--tts-device auto: Whisper runs on the CPU")


def test_auto_follows_whisper_to_the_gpu_when_onnxruntime_can(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(piper, "cuda_voice_problem", lambda: None)
    device, why = place_voices("auto", "cuda")
    assert device == "cuda" and "CUDA provider" in why


def test_auto_without_the_cuda_provider_stays_on_the_cpu_and_says_why() -> None:
    device, why = place_voices("auto", "cuda")
    assert device == "cpu"
    assert why.startswith(f"--tts-device auto: onnxruntime {onnxruntime.__version__} has no CUDA provider"), why


def test_cuda_without_the_cuda_provider_refuses_with_what_to_do() -> None:
    with pytest.raises(CudaUnavailable) as exc:
        place_voices("cuda", "cuda")
    message = str(exc.value)
    assert message.startswith("--tts-device cuda: onnxruntime "), message
    assert "has no CUDA provider" in message and "onnxruntime-gpu" in message
    assert message.endswith("or run with --tts-device cpu"), message


class _FellBack:
    """onnxruntime's InferenceSession where the CUDA provider's libraries did not load: it logs an error and
    runs on the CPU."""

    def __init__(self, model: Any, sess_options: Any = None, providers: Any = None) -> None:
        self.asked = providers

    def get_providers(self) -> list[str]:
        return ["CPUExecutionProvider"]


def test_a_session_that_fell_back_to_the_cpu_is_an_error_not_a_slow_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnxruntime, "InferenceSession", _FellBack)
    with pytest.raises(ValueError, match=r"CUDA provider did not load .*--tts-device cpu"):
        voice_session(b"model", 1, "cuda")
    assert isinstance(voice_session(b"model", 1, "cpu"), _FellBack)  # the CPU asks for nothing more


def test_a_probe_that_fell_back_names_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: providers)
    monkeypatch.setattr(onnxruntime, "InferenceSession", _FellBack)
    problem = piper.cuda_voice_problem()
    assert problem is not None and problem.startswith("onnxruntime's CUDA provider did not load"), problem


def test_each_slot_loads_its_voice_on_the_runner_s_device(monkeypatch: pytest.MonkeyPatch) -> None:
    devices: list[str] = []
    cpu_session = piper.cpu_session

    def spy(model: Any, threads: int, device: str) -> Any:
        devices.append(device)
        return cpu_session(model, threads)

    monkeypatch.setattr(piper, "voice_session", spy)
    PiperRunner(1, 1, "cuda").voice(*default_voice_paths())
    PiperRunner(1, 1).voice(*default_voice_paths())
    assert devices == ["cuda", "cpu"]
