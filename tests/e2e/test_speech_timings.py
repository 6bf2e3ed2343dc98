"""Word timings for speech end to end: ``timestamps=["word"]`` on /v1/audio/speech's SSE events and Kokoro-FastAPI's
/dev/captioned_speech, on the real server and the bundled voice; the times checked against the audio itself."""

from __future__ import annotations

import base64
import io
import itertools
import json
from typing import Any

import av
import httpx
import numpy as np

TEXT = "Dr. Smith paid $5 for the old map. It was the age of wisdom, it was the age of foolishness!"
WORDS = "Dr Smith paid $5 for the old map It was the age of wisdom it was the age of foolishness".split(" ")  # noqa: SIM905


def sse(server, **fields: Any) -> list[dict[str, Any]]:
    body = {"model": "tts-1", "voice": "joe", "input": TEXT, "response_format": "wav", "stream_format": "sse"}
    with httpx.stream("POST", server.base_url + "/v1/audio/speech", json=body | fields, timeout=120) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def samples(data: bytes) -> tuple[int, np.ndarray]:
    with av.open(io.BytesIO(data)) as container:
        rate = container.streams.audio[0].rate
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
    return rate, np.concatenate(frames).astype(np.float32)


def loud_runs(rate: int, x: np.ndarray) -> list[tuple[float, float]]:
    """(start, end) seconds of each stretch louder than 2% of the peak (10 ms frames)."""
    frame = rate // 100
    envelope = np.sqrt(np.mean(x[: len(x) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    loud = np.flatnonzero(envelope > 0.02 * envelope.max())
    runs, start = [], loud[0]
    for a, b in itertools.pairwise(loud):
        if b - a > 1:
            runs.append((start / 100, (a + 1) / 100))
            start = b
    runs.append((start / 100, (loud[-1] + 1) / 100))
    return runs


def test_sse_deltas_carry_the_input_words_as_written_and_done_carries_all(server) -> None:
    events = sse(server, timestamps=["word"])
    deltas, done = events[:-1], events[-1]
    assert done["type"] == "speech.audio.done" and all(e["type"] == "speech.audio.delta" for e in deltas)
    assert len(deltas) >= 2
    streamed = [w for e in deltas for w in e["words"]]
    assert [w["word"] for w in streamed] == WORDS  # "$5", not "five dollars"; "Dr", not "Doctor"
    assert done["words"] == streamed
    assert sum(1 for e in deltas if e["words"]) >= 2  # words come with the audio that ends them, not at the end
    starts = [w["start"] for w in streamed]
    assert starts == sorted(starts) and all(w["start"] < w["end"] for w in streamed)
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    rate, x = samples(audio)
    assert streamed[-1]["end"] <= len(x) / rate


def test_without_timestamps_the_events_have_no_words(server) -> None:
    events = sse(server)
    assert all("words" not in e for e in events)


def test_words_match_the_audio_across_a_break_and_to_the_last_sound(server) -> None:
    ssml = '<speak>Hello there, my friend.<break time="1s"/>Goodbye now.</speak>'
    events = sse(server, input=ssml, timestamps=["word"], speed=1.3, sample_rate=16000)
    words = {w["word"]: w for w in events[-1]["words"]}
    rate, x = samples(b"".join(base64.b64decode(e["audio"]) for e in events[:-1]))
    runs = loud_runs(rate, x)
    gap = max(itertools.pairwise(runs), key=lambda pair: pair[1][0] - pair[0][1])
    gap_start, gap_end = gap[0][1], gap[1][0]
    assert 0.9 <= gap_end - gap_start <= 1.1  # the break as heard (audio/gaps.py)
    # Measured over 30 requests (Piper's noise varies them): "friend" ends 0.00-0.02 s after the silence starts,
    # "Goodbye" starts 0.00-0.03 s before the sound, and "now" ends 0.00-0.05 s after its last frame over 2% of
    # the peak (its fade).
    assert abs(words["friend"]["end"] - gap_start) <= 0.04, (words["friend"], gap_start)
    assert abs(words["Goodbye"]["start"] - gap_end) <= 0.04, (words["Goodbye"], gap_end)
    assert -0.02 <= words["now"]["end"] - runs[-1][1] <= 0.08, (words["now"], runs[-1])


def test_timestamps_other_than_word_or_without_sse_are_a_400_saying_what_to_send(server) -> None:
    body = {"model": "tts-1", "voice": "joe", "input": "Hi.", "stream_format": "sse", "timestamps": ["segment"]}
    response = httpx.post(server.base_url + "/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"].startswith("timestamps") and "'word'" in error["message"], error
    response = httpx.post(
        server.base_url + "/v1/audio/speech", json=body | {"stream_format": "audio", "timestamps": ["word"]}, timeout=60
    )
    assert response.status_code == 400 and "stream_format='sse'" in response.json()["error"]["message"]


def test_captioned_speech_answers_kokoros_json(server) -> None:
    body = {"model": "kokoro", "input": TEXT, "voice": "joe", "response_format": "wav", "stream": False}
    response = httpx.post(server.base_url + "/dev/captioned_speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["audio_format"] == "audio/wav"
    assert [t["word"] for t in result["timestamps"]] == WORDS
    assert all(set(t) == {"word", "start_time", "end_time"} for t in result["timestamps"])
    rate, x = samples(base64.b64decode(result["audio"]))
    assert 0 < result["timestamps"][-1]["end_time"] <= len(x) / rate


def test_captioned_speech_streams_json_lines_each_with_its_words(server) -> None:
    body = {"input": TEXT, "voice": "joe", "response_format": "mp3"}  # stream defaults to true, as Kokoro's
    with httpx.stream("POST", server.base_url + "/dev/captioned_speech", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert len(lines) >= 2 and all(line["audio_format"] == "audio/mpeg" for line in lines)
    words = [t for line in lines for t in line["timestamps"]]
    assert [t["word"] for t in words] == WORDS
    assert all(t["start_time"] < t["end_time"] for t in words)
    assert sum(len(base64.b64decode(line["audio"])) for line in lines) > 10_000
