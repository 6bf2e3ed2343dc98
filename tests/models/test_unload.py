"""An unloaded Whisper runner lets its memory go: nothing outside it keeps it alive (a class-level cache or a
reference cycle kept every runner the engine ever loaded, weights and CTranslate2 threads), and ``close``
frees its weights even while something still holds it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from tests.conftest import Clip
from voxlane.audio.decode import decode_audio
from voxlane.audio.pipeline import window_features
from voxlane.config import EngineConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper import WhisperRunner
from voxlane.runners.whisper_prompts import Memo


def load() -> WhisperRunner:
    # Two thread counts: the decoder runs on a second set of replicas, which close() must free too.
    config = EngineConfig(model_path=str(default_model_path()), engine_workers=1, engine_threads=2, decoder_threads=1)
    return WhisperRunner.load(config)


def transcribe(runner: WhisperRunner, clip: Clip, prompt: str | None = None) -> str:
    samples = decode_audio(clip.path.read_bytes(), 60.0).samples
    features, n_frames, speech = window_features(samples, runner.n_mels, 0.0)
    options = TranscribeOptions(prompt=prompt)
    msg = WindowRequest("r", 0, 1, 0.0, clip.duration_s, n_frames, runner.n_mels, options, speech)
    (out,) = runner.run([WindowPass(msg, features)])
    return "".join(s.text for s in out.result.segments)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counts free objects: a cycle through the runner then shows as a live runner."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_runner_that_has_transcribed_is_freed_with_its_last_reference(dev_set, no_collector) -> None:
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    runner = load()
    assert "forward" in transcribe(runner, clip, prompt="Directions.").lower()  # tokenizers and prompts memoised
    assert len(runner._memo) >= 2
    alive = weakref.ref(runner)
    del runner
    assert alive() is None, [type(r).__name__ for r in gc.get_referrers(alive())]


def test_close_frees_the_weights_of_every_replica_set(dev_set) -> None:
    runner = load()
    assert runner.decoder is not runner.model
    runner.close()
    assert not runner.model.model_is_loaded
    assert not runner.decoder.model_is_loaded
    assert len(runner._memo) == 0
    runner.close()  # twice is harmless


def test_the_memo_keeps_its_most_recent_entries_within_its_size() -> None:
    memo = Memo(3)
    computed: list[int] = []

    def value(k: int) -> int:
        computed.append(k)
        return k * 10

    for k in (1, 2, 3, 1, 4):  # 1 used again before 4 comes: 2 goes
        assert memo(k, lambda k=k: value(k)) == k * 10
    assert len(memo) == 3
    assert memo(1, lambda: value(1)) == 10 and memo(2, lambda: value(2)) == 20
    assert computed == [1, 2, 3, 4, 2]
