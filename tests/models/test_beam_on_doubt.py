"""Beam on doubt (``--doubt-beam-size``): a window whose greedy decode the model doubts is decoded again with
a beam, from the same encoder output, and the beam's text is kept; a window it does not doubt, live work
(partials, finals), or one already decoded with that beam is not decoded twice."""

from __future__ import annotations

from dataclasses import replace

import pytest
from msgspec.structs import replace as replace_msg

from tests.conftest import Clip
from voxlane.audio.decode import decode_audio
from voxlane.audio.pipeline import window_features
from voxlane.config import EngineConfig, default_model_path
from voxlane.messages import TranscribeOptions, WindowRequest
from voxlane.runners.base import WindowPass
from voxlane.runners.whisper import WhisperRunner


@pytest.fixture(scope="module")
def runner() -> WhisperRunner:
    # Greedy first decodes, as the scheduler gives them under load (a lone request's window gets --beam-size).
    return WhisperRunner.load(EngineConfig(model_path=str(default_model_path()), engine_workers=1, beam_size=1))


@pytest.fixture(scope="module")
def window(dev_set: list[Clip], runner: WhisperRunner) -> WindowPass:
    clip = next(c for c in dev_set if c.path.name == "long_so762_0120_2242.flac")
    samples = decode_audio(clip.path.read_bytes(), 3600.0).samples[: 30 * 16000]
    features, n_frames, speech = window_features(samples, runner.n_mels, 0.0)
    msg = WindowRequest("r", 0, 1, 0.0, 30.0, n_frames, runner.n_mels, TranscribeOptions(), speech)
    return WindowPass(msg, features)


def decodes(runner: WhisperRunner, work: list[WindowPass]) -> tuple[list[str], list[tuple[int, int]]]:
    """The texts of ``work`` and the (rows, beam size) of every CTranslate2 call at temperature 0."""
    calls: list[tuple[int, int]] = []
    generate_rows = runner._generate_rows

    def spy(encoded, prompts, languages, batch, temperature, beam_size):
        if temperature == 0:
            calls.append((len(batch), beam_size))
        return generate_rows(encoded, prompts, languages, batch, temperature, beam_size)

    runner._generate_rows = spy  # type: ignore[method-assign]
    try:
        outputs = runner.run(work)
    finally:
        del runner._generate_rows
    return ["".join(s.text for s in o.result.segments).strip() for o in outputs], calls


def test_a_doubted_window_takes_the_beams_text(runner: WhisperRunner, window: WindowPass, monkeypatch) -> None:
    monkeypatch.setattr(runner, "options", replace(runner.options, doubt_beam_size=0))
    (greedy,), _ = decodes(runner, [window])
    monkeypatch.setattr(runner, "options", replace(runner.options, beam_size=5))
    (beam,), _ = decodes(runner, [window])
    assert greedy != beam  # this window reads differently with a beam (else the test proves nothing)

    # Every decode is doubted.
    monkeypatch.setattr(runner, "options", replace(runner.options, beam_size=1, doubt_beam_size=5, doubt_log_prob=0.0))
    (text,), calls = decodes(runner, [window])
    assert calls == [(1, 1), (1, 5)] and text == beam

    monkeypatch.setattr(runner, "options", replace(runner.options, doubt_log_prob=-5.0))  # none is
    (text,), calls = decodes(runner, [window])
    assert calls == [(1, 1)] and text == greedy


def test_live_work_and_windows_already_decoded_with_the_beam_are_not_doubted(
    runner: WhisperRunner, window: WindowPass, monkeypatch
) -> None:
    monkeypatch.setattr(runner, "options", replace(runner.options, doubt_beam_size=5, doubt_log_prob=0.0))
    partial = WindowPass(replace_msg(window.msg, request_id="p", partial=True, deadline_s=0.5), window.features)
    final = WindowPass(replace_msg(window.msg, request_id="f", deadline_s=0.1), window.features)
    wide = WindowPass(replace_msg(window.msg, request_id="w", options=TranscribeOptions(beam_size=5)), window.features)
    _, calls = decodes(runner, [partial])
    assert calls == [(1, 1)]
    _, calls = decodes(runner, [final])  # a live final: its latency is the live session's
    assert calls == [(1, 1)]
    _, calls = decodes(runner, [wide])
    assert calls == [(1, 5)]
    _, calls = decodes(runner, [window, replace(window, msg=replace_msg(window.msg, request_id="b"))])
    assert calls == [(2, 1), (2, 5)]  # the doubted rows of a batch go to the beam together


def test_neither_the_beam_nor_the_fallback_may_replace_a_decode_by_a_loop(
    runner: WhisperRunner, dev_set: list[Clip], monkeypatch
) -> None:
    """On a 1.8 s clip ("6.") encoded short, greedy reads "6." with a low mean log-probability; the doubt's
    beam and the temperature fallback both prefer "6, 6, 6, 6, 6, 6, 6, 6" (-0.22). Neither may win."""
    clip = next(c for c in dev_set if c.path.name == "cv_en_22058267.wav")
    samples = decode_audio(clip.path.read_bytes(), 60.0).samples
    features, n_frames, speech = window_features(samples, runner.n_mels, 0.0)
    msg = WindowRequest("r", 0, 1, 0.0, clip.duration_s, n_frames, runner.n_mels, TranscribeOptions(), speech)
    monkeypatch.setattr(runner, "options", replace(runner.options, short_pad_frames=500, doubt_beam_size=5))
    (text,), calls = decodes(runner, [WindowPass(msg, features)])
    assert (1, 5) in calls  # the beam was asked
    assert text.split() == ["6."], text
