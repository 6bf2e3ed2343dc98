"""The Whisper runner's two sets of replicas (``--engine-threads`` for the encoder, ``--decoder-threads`` for
the decoder): a batch that runs alone encodes on the encoder's threads, a single window that runs beside
another batch encodes on the decoder's, and either way the text is the same."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Clip
from voxlane.audio.decode import decode_audio
from voxlane.audio.pipeline import window_features
from voxlane.config import EngineConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper import WhisperRunner


class Spy:
    """A model whose ``encode`` calls are recorded, with something to do first."""

    def __init__(self, inner: Any, name: str, calls: list[str], before: Callable[[], object] = lambda: None) -> None:
        self.inner, self.name, self.calls, self.before = inner, name, calls, before

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(self.name)
        self.before()
        return self.inner.encode(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def runner() -> WhisperRunner:
    config = EngineConfig(model_path=str(default_model_path()), engine_workers=2, engine_threads=2, decoder_threads=1)
    return WhisperRunner.load(config)


def test_a_batch_alone_encodes_on_the_encoder_threads_and_beside_another_on_the_decoders(
    runner: WhisperRunner, dev_set: list[Clip]
) -> None:
    assert runner.decoder is not runner.model
    clip = next(c for c in dev_set if c.path.name == "long_so762_2327_1027.flac")
    samples = decode_audio(clip.path.read_bytes(), 3600.0).samples
    windows = []
    for i in range(2):
        features, n_frames, speech = window_features(samples[i * 480000 : (i + 1) * 480000], runner.n_mels, i * 30.0)
        msg = WindowRequest(f"r{i}", 0, 1, i * 30.0, 30.0, n_frames, runner.n_mels, TranscribeOptions(), speech)
        windows.append(WindowPass(msg, features))

    def text(window: WindowPass) -> str:
        (output,) = runner.run([window])
        return "".join(s.text for s in output.result.segments).strip()

    model, decoder = runner.model, runner.decoder
    calls: list[str] = []
    try:
        runner.model = Spy(model, "encoder", calls)
        alone = [text(w) for w in windows]
        assert calls == ["encoder", "encoder"]

        # The first batch waits inside its encode until the second has started its own.
        calls.clear()
        second_started = threading.Event()
        runner.model = Spy(model, "encoder", calls, before=lambda: second_started.wait(timeout=60))
        runner.decoder = Spy(decoder, "decoder", calls, before=second_started.set)
        side_by_side = ["", ""]
        first = threading.Thread(target=lambda: side_by_side.__setitem__(0, text(windows[0])))
        first.start()
        while not calls:
            time.sleep(0.01)
        side_by_side[1] = text(windows[1])
        first.join(timeout=60)
    finally:
        runner.model, runner.decoder = model, decoder
    assert calls == ["encoder", "decoder"]
    assert side_by_side == alone
    assert alone[0] and alone[1]
