"""Live finals on short windows (``--short-final-pad-s``): a turn's final of at most 8 s is encoded on 8 s plus
the finals' pad, and a short read that loops is read again on all 30 s.

The turn is what `voxlane bench realtime` sent the server for mfa_creaky.wav: 1 s of silence, then the clip,
up to the first pause (3.744 s in all; the server's features of that final matched these to 0.007 on
average). On 13 s (a pad of 5 s) beam 3 reads it "Montreal, Montreal, Montreal, ..."; on 18 s (the default
pad) and on 30 s, "Montreal."."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.models.spy import spied_runner
from voxlane.audio.decode import decode_audio
from voxlane.audio.pipeline import window_features
from voxlane.config import EngineConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import SHORT_MAX_S, WindowPass
from voxlane.runners.whisper import WhisperRunner

TURN_S = 3.744


@pytest.fixture(scope="module")
def runner() -> WhisperRunner:
    config = EngineConfig(model_path=str(default_model_path()), engine_workers=1)
    return WhisperRunner.load(replace(config, doubt_beam_size=0))


def final_read(runner: WhisperRunner, dev_set, pad_frames: int, prefix: str | None = None) -> tuple[str, list[int]]:
    """The turn's final text with the finals' pad ``pad_frames``, and the frames each encoder pass got."""
    clip = next(c for c in dev_set if c.path.name == "mfa_creaky.wav")
    samples = decode_audio(clip.path.read_bytes(), 60.0).samples
    pcm = np.concatenate([np.zeros(16000, dtype=samples.dtype), samples])[: round(TURN_S * 16000)]
    features, n_frames, speech = window_features(pcm, runner.n_mels, 0.0)
    options = TranscribeOptions(beam_size=3, prefix=prefix)  # --realtime-beam-size
    msg = WindowRequest("rt", 0, 1, 0.0, TURN_S, n_frames, runner.n_mels, options, speech, deadline_s=0.1)
    with spied_runner(runner, short_final_pad_frames=pad_frames) as calls:
        (out,) = runner.run([WindowPass(msg, features)])
    return "".join(s.text for s in out.result.segments).strip(), [f for name, f, _ in calls if name == "encode"]


def test_a_final_is_encoded_on_8_s_and_the_finals_pad(runner, dev_set) -> None:
    text, frames = final_read(runner, dev_set, 1000)
    assert frames == [round(SHORT_MAX_S * 100) + 1000]
    assert text == "Montreal."
    assert final_read(runner, dev_set, 0) == ("Montreal.", [3000])  # --short-final-pad-s 0


def test_a_final_whose_short_read_loops_is_read_again_on_30_s(runner, dev_set) -> None:
    text, frames = final_read(runner, dev_set, 500)
    assert frames == [round(SHORT_MAX_S * 100) + 500, 3000]
    assert text == "Montreal."
