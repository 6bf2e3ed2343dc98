"""A forced prefix (``TranscribeOptions.prefix``, what a live final is given for the previous turns whose
audio opens its window): the bundled Whisper reads on from it, and the result holds only what follows."""

from __future__ import annotations

from dataclasses import replace

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
    # 30 s windows and one decode each: what this file checks does not depend on them
    config = EngineConfig(model_path=str(default_model_path()), engine_workers=1)
    # Greedy unless a window asks for its own beam, as the scheduler's windows under load.
    return WhisperRunner.load(replace(config, short_window_pad_s=0.0, doubt_beam_size=0, beam_size=1))


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


def test_a_window_may_ask_for_its_own_beam_size(runner: WhisperRunner, dev_set: list[Clip], monkeypatch) -> None:
    """A live final asks for a beam (``--realtime-beam-size``) in a batch beside greedy windows: the rows
    go to CTranslate2 in one call per beam size, and each result stays with its window."""
    clips = sorted((c for c in dev_set if 3.0 < c.duration_s < 10.0), key=lambda c: c.path.name)[:2]
    work = []
    for clip, beam_size in zip(clips, (5, None)):
        samples = decode_audio(clip.path.read_bytes(), 3600.0).samples
        features, n_frames, speech = window_features(samples, runner.n_mels, 0.0)
        options = TranscribeOptions(beam_size=beam_size)
        msg = WindowRequest(clip.path.name, 0, 1, 0.0, clip.duration_s, n_frames, runner.n_mels, options, speech)
        work.append(WindowPass(msg, features))
    calls: list[tuple[int, int]] = []
    generate_rows = runner._generate_rows

    def spy(encoded, prompts, languages, batch, temperature, beam_size):
        if temperature == 0:  # the temperature fallback's sampled decodes, where a host's read needs them, aside
            calls.append((len(batch), beam_size))
        return generate_rows(encoded, prompts, languages, batch, temperature, beam_size)

    monkeypatch.setattr(runner, "_generate_rows", spy)
    outputs = runner.run(work)
    assert sorted(calls) == [(1, 1), (1, 5)]
    assert [o.result.request_id for o in outputs] == [c.path.name for c in clips]
    for clip, output in zip(clips, outputs):
        text = "".join(s.text for s in output.result.segments)
        assert text.strip(), clip.path.name
