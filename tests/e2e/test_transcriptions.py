"""The transcription API through the official openai client against a real server on 127.0.0.1."""

from __future__ import annotations

import io
import time
from concurrent.futures import ThreadPoolExecutor

import av
import httpx
import pytest
import soundfile as sf

from tests.conftest import Clip
from voxlane.bench.wer import normalise, wer

# Measured on this machine with the bundled tiny.en (int8, greedy): 0.15-0.18 over the dev set's short
# utterances (two whispered and one 2-word clip are hard on purpose). The bound leaves room for noise.
SHORT_WER_BOUND = 0.25


def short_clips(dev_set: list[Clip]) -> list[Clip]:
    return [c for c in dev_set if c.duration_s < 30]


def by_name(dev_set: list[Clip], name: str) -> Clip:
    return next(c for c in dev_set if c.path.name == name)


def test_health(server) -> None:  # /v1/models: tests/e2e/test_models.py
    assert httpx.get(server.base_url + "/health").json() == {"status": "ok", "engine_restarts": 0}


def test_json_and_text(client, dev_set) -> None:
    clip = by_name(dev_set, "cmu_goforward.wav")
    result = client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb"))
    assert normalise(result.text) == "go forward 10 meters"
    text = client.audio.transcriptions.create(
        model="whisper-tiny.en", file=clip.path.open("rb"), response_format="text"
    )
    assert normalise(text) == "go forward 10 meters"


def test_verbose_json_segments_and_words(client, dev_set) -> None:
    clip = by_name(dev_set, "vctk_p225_020.opus")
    result = client.audio.transcriptions.create(
        model="whisper-1",
        file=clip.path.open("rb"),
        response_format="verbose_json",
        timestamp_granularities=["segment", "word"],
    )
    assert result.language == "english"
    assert abs(result.duration - clip.duration_s) < 0.05
    assert wer([clip.text], [result.text]) < 0.2
    assert result.segments and result.words
    assert [normalise(w.word) for w in result.words if normalise(w.word)] == normalise(result.text).split()
    starts = [w.start for w in result.words]
    assert starts == sorted(starts)
    assert all(0 <= w.start <= w.end <= clip.duration_s + 0.05 for w in result.words)
    for seg in result.segments:
        assert 0 <= seg.start <= seg.end <= clip.duration_s + 0.05


def test_word_granularity_alone_omits_segments(client, dev_set) -> None:
    clip = by_name(dev_set, "cmu_goforward.wav")
    result = client.audio.transcriptions.create(
        model="whisper-1",
        file=clip.path.open("rb"),
        response_format="verbose_json",
        timestamp_granularities=["word"],
    )
    assert result.words and not getattr(result, "segments", None)


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_subtitles(client, dev_set, fmt: str) -> None:
    clip = by_name(dev_set, "mfa_um.wav")
    body = client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb"), response_format=fmt)
    if fmt == "vtt":
        assert body.startswith("WEBVTT\n\n00:00:00.000 --> ")
    else:
        assert body.startswith("1\n00:00:00,000 --> ")
    assert "montreal" in body.lower()


# A stream's first delta, as a fraction of the time from the request to its done event. The clip has 6 windows
# and the first is sent to the engine as soon as its features are ready, so it is decoded while the others
# are still queued or batched: measured 0.38-0.58 for this clip, loaded or not (0.12-0.36 for speechocean
# files of the same length). A server that holds the stream until its end sends every delta within
# milliseconds of the done event: about 1.0.
FIRST_DELTA_FRACTION = 0.85


def test_stream_true_sends_deltas_in_order_then_done(client, dev_set) -> None:
    clip = next(c for c in dev_set if c.duration_s > 60)
    events, arrived_s = [], []
    sent_s = time.monotonic()
    for event in client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb"), stream=True):
        events.append(event)
        arrived_s.append(time.monotonic() - sent_s)
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    done = [e for e in events if e.type == "transcript.text.done"]
    assert len(done) == 1 and events[-1].type == "transcript.text.done"
    assert len(deltas) > 5
    assert "".join(d.delta for d in deltas).strip() == done[0].text
    assert wer([clip.text], [done[0].text]) < 0.25
    # Text arrives as windows finish, not all at the end.
    first_delta_s = arrived_s[events.index(deltas[0])]
    assert first_delta_s < FIRST_DELTA_FRACTION * arrived_s[-1], (first_delta_s, arrived_s[-1])


def _encode(clip: Clip, container: str, codec: str, rate: int) -> bytes:
    samples, source_rate = sf.read(clip.path, dtype="float32", always_2d=True)
    mono = samples.mean(axis=1)
    out = io.BytesIO()
    if codec == "vorbis":  # PyAV's FFmpeg has no vorbis encoder; libsndfile has one
        sf.write(out, mono, source_rate, format="OGG", subtype="VORBIS")
        return out.getvalue()
    with av.open(out, mode="w", format=container) as c:
        stream = c.add_stream(codec, rate=rate)
        stream.layout = "mono"
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray(mono[None, :], format="fltp", layout="mono")
        frame.sample_rate = source_rate
        for part in resampler.resample(frame) + resampler.resample(None):
            for packet in stream.encode(part):
                c.mux(packet)
        for packet in stream.encode(None):
            c.mux(packet)
    return out.getvalue()


CONTAINERS = {
    "wav": ("wav", "pcm_s16le", 44100),
    "flac": ("flac", "flac", 48000),
    "mp3": ("mp3", "libmp3lame", 44100),
    "ogg": ("ogg", "vorbis", 16000),
    "opus": ("ogg", "libopus", 48000),
    "webm": ("webm", "libopus", 48000),
    "m4a": ("mp4", "aac", 44100),
}


@pytest.mark.parametrize("ext", sorted(CONTAINERS))
def test_every_container(client, dev_set, ext: str) -> None:
    clip = by_name(dev_set, "cmu_goforward.wav")
    data = _encode(clip, *CONTAINERS[ext])
    result = client.audio.transcriptions.create(model="whisper-1", file=(f"speech.{ext}", data))
    assert normalise(result.text) == "go forward 10 meters", ext


def test_stereo_48k_wav(client, dev_set) -> None:
    clip = by_name(dev_set, "vctk_p225_002_mic1L_mic2R_48k_stereo.wav")
    result = client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb"))
    assert wer([clip.text], [result.text]) < 0.25


def test_dev_set_wer_concurrently(client, dev_set) -> None:
    clips = short_clips(dev_set)

    def transcribe(clip: Clip) -> str:
        return client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb")).text

    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(transcribe, clips))
    score = wer([c.text for c in clips], texts)
    print(f"dev-set short utterances: WER {score:.3f} over {len(clips)} clips")
    assert score <= SHORT_WER_BOUND


def test_prompt_and_temperature_are_accepted(client, dev_set) -> None:
    clip = by_name(dev_set, "mfa_um.wav")
    result = client.audio.transcriptions.create(
        model="whisper-1", file=clip.path.open("rb"), prompt="Montreal Forced Aligner", temperature=0.2, language="en"
    )
    assert "montreal" in result.text.lower()


def test_translation_with_an_english_only_model_says_why(client, dev_set) -> None:
    import openai

    clip = by_name(dev_set, "cmu_goforward.wav")
    with pytest.raises(openai.BadRequestError) as err:
        client.audio.translations.create(model="whisper-1", file=clip.path.open("rb"))
    body = err.value.response.json()
    assert body["error"]["code"] == "translation_unsupported"
    assert "English-only" in body["error"]["message"]


def test_noise_only_file_gives_an_empty_transcript(client, dev_set) -> None:
    # 25 s of pink noise at -60 dBFS: Whisper alone says ". . . ." or "Thank you."; the answer is nothing.
    clip = by_name(dev_set, "noise_only_pink_-60dBFS_25s.flac")
    for strategy in ("auto", "none"):
        result = client.audio.transcriptions.create(
            model="whisper-1", file=clip.path.open("rb"), response_format="verbose_json", chunking_strategy=strategy
        )
        assert len(result.text.split()) <= 2, (strategy, result.text)
        assert abs(result.duration - clip.duration_s) < 0.05


def test_chunking_strategy_with_the_openai_client(server, client, dev_set) -> None:
    clip = by_name(dev_set, "so762_2251_speech_25s_noise_speech.flac")
    results = {}
    for name, strategy in {
        "auto": "auto",
        "server_vad": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 200},
        "none": "none",
    }.items():
        results[name] = client.audio.transcriptions.create(
            model="whisper-1",
            file=clip.path.open("rb"),
            response_format="verbose_json",
            timestamp_granularities=["segment"],
            chunking_strategy=strategy,
        )  # type: ignore[arg-type]
    for name, result in results.items():
        assert wer([clip.text], [result.text]) < 0.15, (name, result.text)
        starts = [s.start for s in result.segments]
        assert starts == sorted(starts)
    # With VAD, nothing is decoded in the 25 s of noise (26-51 s): timestamps are true times in the file.
    for name in ("auto", "server_vad"):
        assert not [s for s in results[name].segments if 27.0 < s.start < 50.0], name
    # A field of another shape (curl's JSON string) is read the same way.
    response = httpx.post(
        server.base_url + "/v1/audio/transcriptions",
        files={"file": clip.path.open("rb")},
        data={"model": "whisper-1", "chunking_strategy": '{"type": "server_vad", "threshold": 0.6}'},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert wer([clip.text], [response.json()["text"]]) < 0.15
