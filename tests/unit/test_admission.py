"""Admission rules on a fake clock: bounded queues, what an empty queue takes, Retry-After from the
measured drain rate, and room freed item by item."""

from __future__ import annotations

import math

import pytest

from voxlane.engine.client.admission import RETRY_AFTER_MAX_S, Admission, DrainRate
from voxlane.errors import QueueFull


def admission(**limits: float) -> Admission:
    defaults = dict(
        max_transcriptions=8, max_audio_s=100.0, max_windows=100, max_speech_streams=4, max_speech_chars=1000
    )
    return Admission(**{**defaults, **limits})  # type: ignore[arg-type]


def test_drain_rate_learns_the_engines_pace_and_leaves_idle_time_out() -> None:
    rate = DrainRate(prior_per_s=1.0, tau_s=20.0)
    rate.busy(0.0)
    for t in range(1, 121):  # 30 s of audio done every second for two minutes
        rate.done(30.0, float(t))
    assert rate.per_s == pytest.approx(30.0, rel=0.01)
    rate.idle()
    rate.busy(3600.0)  # an idle hour, then work again: the hour does not count
    rate.done(30.0, 3601.0)
    assert rate.per_s == pytest.approx(30.0, rel=0.01)
    for _ in range(8):  # a batch: eight results at the same instant
        rate.done(30.0, 3602.0)
    assert rate.per_s > 30.0


def test_a_full_queue_answers_429_with_retry_after_from_the_drain_rate() -> None:
    adm = admission(max_audio_s=100.0)
    adm.audio.rate.per_s = 10.0  # seconds of audio per second, as measured
    adm.admit_windows("a", [30.0, 30.0, 30.0], now=0.0)
    assert adm.audio.queued == 90.0
    assert adm.audio_room_s() == 10.0
    with pytest.raises(QueueFull) as raised:
        adm.admit_windows("b", [30.0], now=0.0)
    err = raised.value
    assert (err.status_code, err.error_type, err.code) == (429, "rate_limit_error", "queue_full")
    assert "--max-queued-audio-s" in err.message
    assert err.headers() == {"Retry-After": "2"}  # 20 s over the limit at 10 s per second
    adm.admit_windows("small", [10.0], now=0.0)  # what fits is admitted
    assert adm.audio_room_s() == 0.0


def test_an_empty_queue_takes_one_request_over_the_limit_and_retry_after_is_clamped() -> None:
    adm = admission(max_audio_s=100.0)
    adm.audio.rate.per_s = 1.0
    adm.admit_windows("huge", [30.0] * 10, now=0.0)  # 300 s alone: admitted, or it would never be
    with pytest.raises(QueueFull) as raised:
        adm.admit_windows("next", [5.0], now=0.0)
    assert raised.value.headers() == {"Retry-After": str(int(RETRY_AFTER_MAX_S))}


def test_room_is_freed_window_by_window_and_the_rest_on_release() -> None:
    adm = admission(max_audio_s=100.0)
    adm.admit_windows("a", [30.0, 30.0, 20.0], now=0.0)
    adm.done("a", 0, now=1.0)
    adm.done("a", 0, now=1.5)  # a duplicate result frees nothing twice
    assert adm.audio.queued == 50.0 and adm.windows.queued == 2
    adm.release("a")  # the request ended early (failed, cancelled, client gone)
    assert adm.audio.queued == 0 and adm.windows.queued == 0
    assert adm.audio_room_s() == math.inf
    adm.done("a", 1, now=2.0)  # a late result of a gone request changes nothing
    assert adm.audio.queued == 0


def test_requests_at_once_and_an_already_full_queue_answer_before_any_decoding() -> None:
    adm = admission(max_transcriptions=2, max_audio_s=50.0)
    adm.start_transcription()
    adm.start_transcription()
    with pytest.raises(QueueFull, match="--max-transcription-requests"):
        adm.start_transcription()
    adm.end_transcription()
    adm.admit_windows("a", [30.0, 30.0], now=0.0)  # 60 s: the queue is at its limit
    with pytest.raises(QueueFull, match="--max-queued-audio-s"):
        adm.start_transcription()


def test_speech_streams_and_characters_are_bounded() -> None:
    adm = admission(max_speech_streams=2, max_speech_chars=100)
    adm.admit_speech("a", [40, 40], now=0.0)
    with pytest.raises(QueueFull, match="--max-queued-speech-chars"):
        adm.check_speech(30)
    adm.done("a", 0, now=1.0)
    adm.admit_speech("b", [30], now=1.0)
    with pytest.raises(QueueFull, match="--max-speech-streams"):
        adm.check_speech(1)
    adm.end_speech("a")
    adm.end_speech("b")
    assert adm.speech_streams == 0 and adm.chars.queued == 0
