"""Realtime sessions' audio front end: base64 pcm16, resampling, and the server_vad turn rules."""

from __future__ import annotations

import base64

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import load_dev_set
from voxlane.audio import vad
from voxlane.audio.live import FRAME, BadAudio, LiveInput, StreamingVad, TurnDetector, decode_pcm16
from voxlane.audio.resample import resamplers
from voxlane.audio.vad import VadOptions


def test_garbage_and_odd_lengths_are_refused_with_what_to_send() -> None:
    with pytest.raises(BadAudio, match="base64"):
        decode_pcm16("not base64 at all!")
    with pytest.raises(BadAudio, match="odd"):
        decode_pcm16(base64.b64encode(b"\x00\x01\x02").decode())
    assert decode_pcm16(base64.b64encode(np.array([1, -2], "<i2").tobytes()).decode()).tolist() == [1, -2]


def test_turns_start_with_prefix_padding_and_stop_after_the_silence() -> None:
    options = VadOptions(threshold=0.5, prefix_padding_ms=64, silence_duration_ms=96)  # 2 and 3 frames
    detector = TurnDetector(options)
    probs = np.array([0.1] * 10 + [0.9] * 5 + [0.2] * 2 + [0.9] + [0.1] * 3 + [0.1] * 4, dtype=np.float32)
    events = detector.feed(probs[:12]) + detector.feed(probs[12:])  # split anywhere: same events
    assert [(e.kind, e.sample) for e in events] == [("start", 10 * FRAME - 1024), ("stop", 21 * FRAME)]
    # 0.2 (between off=0.35 and on) twice, then speech: not a pause; three quiet frames end the turn


def test_a_pause_comes_200_ms_into_the_silence_speech_resumes_it_and_the_stop_names_the_same_quiet() -> None:
    options = VadOptions(threshold=0.5, prefix_padding_ms=0, silence_duration_ms=500)  # 16 frames
    detector = TurnDetector(options)
    # speech, 8 quiet frames (a pause: 7 frames = 224 ms), speech again, then 16 quiet frames (pause, stop)
    probs = np.array([0.9] * 5 + [0.1] * 8 + [0.9] * 3 + [0.1] * 20, dtype=np.float32)
    events = detector.feed(probs)
    assert [(e.kind, e.sample, e.quiet_from) for e in events] == [
        ("start", 0, -1),
        ("pause", 12 * FRAME, 5 * FRAME),
        ("resume", 13 * FRAME, 5 * FRAME),
        ("pause", 23 * FRAME, 16 * FRAME),
        ("stop", 32 * FRAME, 16 * FRAME),
    ]
    # the first pause's quiet run was broken by speech (its decode is dropped at once): only the second
    # one's decode may end the turn


def test_a_stream_of_chunks_is_one_resampled_signal_and_finds_the_speech() -> None:
    clip = next(c for c in load_dev_set() if 3.0 < c.duration_s < 10.0)
    samples, rate = sf.read(clip.path, dtype="float32")
    assert rate == 16000
    at_24k = resamplers.resample(samples, 16000, 24000)
    silence = np.zeros(24000, dtype=np.float32)
    signal = np.concatenate((silence, at_24k, silence, silence))
    pcm = (np.clip(signal, -1, 1) * 32767).astype("<i2")
    live = LiveInput(24000, VadOptions(silence_duration_ms=500))
    out, events = [], []
    for i in range(0, len(pcm), 2400):  # 100 ms chunks, as a browser sends them
        fed = live.feed(base64.b64encode(pcm[i : i + 2400].tobytes()).decode())
        out.append(fed.pcm)
        events += fed.events
    live.close()
    total = sum(len(p) for p in out)
    assert abs(total - len(signal) * 2 // 3) <= 16000 * 0.05  # 24 kHz in, 16 kHz out
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-1] == "stop"
    assert 0.7 < events[0].sample / 16000 < 2.5  # after the first second of silence (minus the padding)
    assert events[-1].sample / 16000 < 1.0 + clip.duration_s + 1.0


def test_partials_are_cut_where_they_start_repeating() -> None:
    from voxlane.text.repeats import cut_repeats

    def cut(text: str) -> str:
        return " ".join(cut_repeats(text.split()))

    assert cut("Go forward 10 meters. Go forward 10 meters. Go") == "Go forward 10 meters."
    assert cut("6 6 6 6") == "6"
    assert cut("Montreal Forest Line. Montreal Forest Line.") == "Montreal Forest Line."
    said = ["this", "is", "all", "very", "very", "whispered"]
    assert cut_repeats(said) == said


def test_a_newer_decode_sends_only_the_words_past_those_sent() -> None:
    from voxlane.audio.live import unsent

    def rest(words: str, sent: str) -> str:
        return " ".join(unsent(words.split(), sent.split()))

    assert rest("this is a long stop", "") == "this is a long stop"
    assert rest("this is a long stop", "this is") == "a long stop"
    # the final read more audio before the speech: its first words were never in a partial
    assert rest("I really don't know. This is a long stop.", "This is a") == "long stop."
    # a partial heard the last sent word differently: it stands for one word of the final
    assert rest("Montreal forced aligner here", "Montreal forest") == "aligner here"
    assert rest("word word word word", "word word") == "word word"
    assert rest("something else entirely", "nothing alike") == "entirely"


def test_the_streaming_vad_scores_each_frame_as_silero_over_the_whole_signal() -> None:
    clip = next(c for c in load_dev_set() if 3.0 < c.duration_s < 10.0)
    samples, _ = sf.read(clip.path, dtype="float32")
    streaming = StreamingVad()
    chunks = [streaming.probabilities(samples[i : i + 1600]) for i in range(0, len(samples), 1600)]
    live = np.concatenate(chunks)
    whole = vad.model().probabilities(samples)[: len(live)]
    assert len(live) == len(samples) // FRAME
    assert np.allclose(live, whole, atol=1e-4) and whole.max() > 0.5  # the same scores, speech among them
