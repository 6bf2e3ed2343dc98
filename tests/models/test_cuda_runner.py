"""Whisper on a GPU: the bundled tiny.en on CUDA (float16) reads a dev clip as the CPU (int8) does. Skips
cleanly where CTranslate2 sees no CUDA device or cuBLAS 12 is missing (CI has no GPU; docs/gpu.md)."""

from __future__ import annotations

import pytest

from voxlane.config import EngineConfig, default_model_path
from voxlane.runners.cuda import CudaUnavailable, cuda_device_count, place


def cuda_or_skip() -> None:
    if cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    try:
        place("cuda", "auto")
    except CudaUnavailable as exc:
        pytest.skip(str(exc))


def test_a_window_reads_the_same_on_the_gpu_and_the_cpu(dev_set) -> None:
    cuda_or_skip()
    import jiwer

    from voxlane.audio.pipeline import decode_and_split, window_features
    from voxlane.messages import TranscribeOptions, WindowRequest
    from voxlane.runners.base import WindowPass
    from voxlane.runners.whisper import WhisperRunner

    clip = next(c for c in dev_set if 5 < c.duration_s < 30)
    window = decode_and_split(clip.path.read_bytes(), 60.0, 8.0).windows[0]
    features, n_frames, speech = window_features(window.pcm, 80, window.offset_s, window.speech)
    msg = WindowRequest("r", 0, 1, window.offset_s, window.duration_s, n_frames, 80, TranscribeOptions(), speech)
    texts = {}
    for device in ("cuda", "cpu"):
        runner = WhisperRunner.load(EngineConfig(model_path=str(default_model_path()), device=device))
        (out,) = runner.run([WindowPass(msg, features)])
        texts[device] = "".join(s.text for s in out.result.segments).strip()
    assert texts["cuda"]
    assert jiwer.wer(texts["cpu"].lower(), texts["cuda"].lower()) <= 0.1, texts
