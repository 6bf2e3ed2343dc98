"""Whisper on a GPU: the bundled tiny.en on CUDA (float16) reads a dev clip as the CPU (int8) does. Skips
cleanly where CTranslate2 sees no CUDA device or cuBLAS 12 is missing (CI has no GPU; docs/gpu.md)."""

from __future__ import annotations

import pytest

from tests.models.spy import ModelSpy
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
    from voxlane.audio.pipeline import decode_and_split, window_features
    from voxlane.bench.wer import wer
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
    assert wer([texts["cpu"]], [texts["cuda"]], str.lower) <= 0.1, texts


def test_the_warm_up_runs_every_kind_of_decode_a_request_may_ask_for() -> None:
    """On a GPU each kind of decode compiles kernels of its own at first use (seconds): the warm-up runs
    each once, so that the first live final (beam 3), a temperature fallback, word timestamps or a partial
    (features cut short) never pay for it. Checked on the CPU, where the same calls run."""
    from voxlane.runners.whisper import WhisperRunner

    runner = WhisperRunner.load(EngineConfig(model_path=str(default_model_path()), device="cpu"))
    calls: list[tuple[str, int | None, dict]] = []
    runner.model = ModelSpy(runner.model, calls)
    runner.decoder = ModelSpy(runner.decoder, calls)
    runner.warm_up(4, beam_sizes=(3,))
    generates = [kw for name, _, kw in calls if name == "generate"]
    beams = {kw.get("beam_size", 1) for kw in generates if "sampling_temperature" not in kw}
    doubt_beam_size = runner.options.doubt_beam_size
    assert {3, doubt_beam_size} <= beams and doubt_beam_size > 1  # the live final's, the doubt's
    assert any(kw.get("sampling_temperature", 0) > 0 for kw in generates)
    assert any(name == "align" for name, _, _ in calls)
    assert {frames for name, frames, _ in calls if name == "encode"} == {3000, 300}
    assert sum(1 for kw in generates if kw.get("beam_size") == 1) >= 3  # batch sizes 1, 2, 4
