"""A forced prefix (``TranscribeOptions.prefix``, what a live final is given for the previous turns whose
audio opens its window): the bundled Whisper reads on from it, and the result holds only what follows."""

from __future__ import annotations

import pytest

from tests.conftest import Clip
from voxlane.audio.decode import decode_audio
from voxlane.audio.pipeline import window_features
from voxlane.config import EngineConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper import WhisperRunner


@pytest.fixture(scope="module")
def runner() -> WhisperRunner:
    return WhisperRunner.load(EngineConfig(model_path=str(default_model_path()), engine_workers=1))


def test_a_prefix_is_read_on_from_and_left_out_of_the_text(runner: WhisperRunner, dev_set: list[Clip]) -> None:
    clip = next(c for c in dev_set if c.path.name == "long_so762_2327_1027.flac")
    samples = decode_audio(clip.path.read_bytes(), 3600.0).samples[30 * 16000 : 40 * 16000]
    features, n_frames, speech = window_features(samples, runner.n_mels, 30.0)

    def read(prefix: str | None) -> str:
        msg = WindowRequest("r", 0, 1, 30.0, 10.0, n_frames, runner.n_mels, TranscribeOptions(prefix=prefix), speech)
        (output,) = runner.run([WindowPass(msg, features)])
        assert output.resume_s is None  # one pass: no continuation reads the prefix's audio again
        return "".join(s.text for s in output.result.segments).strip()

    whole = read(None)
    first, rest = whole.split(". ", 1)  # "Actually, I have to run." / "My ... have to be better. If you ..."
    after = read(first + ".")
    print(f"whole: {whole!r}\nafter {first!r}: {after!r}")
    assert after.split()[:6] == rest.split()[:6], (rest, after)  # on from the prefix, which is not repeated
