"""Bad input gets its 4xx with OpenAI's error JSON and a message that says what to send instead, and the
next good request still succeeds."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from tests.conftest import Clip
from voxlane.bench.wer import normalise


def wav_bytes(rate: int, seconds: float = 1.0, declared_data_len: int | None = None) -> bytes:
    n = int(16000 * seconds)
    pcm = (np.sin(np.arange(n) / 10) * 8000).astype("<i2").tobytes()
    data_len = len(pcm) if declared_data_len is None else declared_data_len
    byte_rate = (rate * 2) & 0xFFFFFFFF
    header = (
        b"RIFF"
        + struct.pack("<I", min(36 + data_len, 0xFFFFFFFF))
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, byte_rate, 2, 16)
        + b"data"
        + struct.pack("<I", data_len)
    )
    return header + pcm


def tone_wav(rate: int, seconds: float) -> bytes:
    """A 16-bit mono WAV of a 440 Hz tone, ``seconds`` long at ``rate``."""
    n = round(rate * seconds)
    pcm = (np.sin(2 * np.pi * 440 * np.arange(n) / rate) * 8000).astype("<i2").tobytes()
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    return b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + fmt + b"data" + struct.pack("<I", len(pcm)) + pcm


def post(server, files=None, data=None) -> httpx.Response:
    return httpx.post(
        server.base_url + "/v1/audio/transcriptions",
        files=files,
        data={"model": "whisper-1", **(data or {})},
        timeout=60,
    )


def assert_error(response: httpx.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    for word in words:
        assert word.lower() in error["message"].lower(), error["message"]
    return error


def truncated_mp3(dev_set: list[Clip]) -> bytes:
    mp3 = next(c for c in dev_set if c.path.suffix == ".mp3").path.read_bytes()
    return mp3[:300]  # the header and a piece of the first frame


CASES = {
    "empty file": (lambda d: {"file": ("a.wav", b"")}, {}, 400, ["empty"]),
    "random bytes": (
        lambda d: {"file": ("a.wav", np.random.default_rng(0).bytes(20000))},
        {},
        400,
        ["could not read", "send wav"],
    ),
    "truncated mp3": (lambda d: {"file": ("a.mp3", truncated_mp3(d))}, {}, 400, ["at least 0.1 s"]),
    "wav header with 0 Hz": (lambda d: {"file": ("a.wav", wav_bytes(0))}, {}, 400, ["send wav"]),
    "wav header with 10^9 Hz": (
        lambda d: {"file": ("a.wav", wav_bytes(10**9))},
        {},
        400,
        ["1000000000 Hz", "re-encode"],
    ),
    "wav at 999 Hz": (lambda d: {"file": ("a.wav", tone_wav(999, 1.0))}, {}, 400, ["999 Hz", "1000 to 768000"]),
    "wav at 768001 Hz": (
        lambda d: {"file": ("a.wav", tone_wav(768001, 0.2))},
        {},
        400,
        ["768001 Hz", "1000 to 768000", "re-encode"],
    ),
    "0.05 s of audio": (lambda d: {"file": ("a.wav", tone_wav(16000, 0.05))}, {}, 400, ["0.050 s", "at least 0.1 s"]),
    "prompt over 4096 characters": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"prompt": "word " * 820},  # 4100 characters
        400,
        ["'prompt'", "4096 characters"],
    ),
    "missing file": (lambda d: None, {}, 400, ["missing 'file'"]),
    "unknown model": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"model": "whisper-huge"},
        404,
        ["whisper-huge", "whisper-tiny.en", "GET /v1/models"],
    ),
    "bad response_format": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"response_format": "xml"},
        400,
        ["json, text, verbose_json, srt, vtt"],
    ),
    "bad temperature": (lambda d: {"file": ("a.wav", wav_bytes(16000))}, {"temperature": "7"}, 400, ["temperature"]),
    "unknown language": (lambda d: {"file": ("a.wav", wav_bytes(16000))}, {"language": "klingon"}, 400, ["iso-639-1"]),
    "non-English language on tiny.en": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"language": "de"},
        400,
        ["english-only"],
    ),
    "stream with srt": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"stream": "true", "response_format": "srt"},
        400,
        ["stream"],
    ),
    "timestamp_granularities with json": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"timestamp_granularities[]": "word"},
        400,
        ["timestamp_granularities", "response_format='verbose_json'"],
    ),
    "chunking_strategy sent twice": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"chunking_strategy": "auto", "chunking_strategy[type]": "server_vad"},
        400,
        ["sent twice", "server_vad"],
    ),
    "unknown chunking_strategy": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"chunking_strategy": "fast"},
        400,
        ["chunking_strategy", "'auto'", "server_vad"],
    ),
    "chunking_strategy threshold out of range": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"chunking_strategy[type]": "server_vad", "chunking_strategy[threshold]": "2"},
        400,
        ["threshold", "0 to 1"],
    ),
    "chunking_strategy of another type": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"chunking_strategy": '{"type": "semantic_vad"}'},
        400,
        ["chunking_strategy", "server_vad"],
    ),
    "chunking_strategy not JSON": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"chunking_strategy": '{"type": server_vad'},
        400,
        ["not valid json"],
    ),
    "chunking_strategy with an unknown option": (
        lambda d: {"file": ("a.wav", wav_bytes(16000))},
        {"chunking_strategy": '{"type": "server_vad", "padding": 3}'},
        400,
        ["chunking_strategy", "prefix_padding_ms"],
    ),
}


CODES = {"truncated mp3": "audio_too_short", "0.05 s of audio": "audio_too_short"}
"""The OpenAI error ``code`` some cases must carry."""

PARAMS = {
    "stream with srt": "stream",
    "timestamp_granularities with json": "timestamp_granularities",
    "chunking_strategy sent twice": "chunking_strategy",
}
"""The field some cases must blame: a rule between fields names the one to change."""


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda case: case.replace(" ", "-"))
def test_bad_input_gets_a_clear_4xx(server, dev_set, case: str) -> None:
    make_files, data, status, words = CASES[case]
    error = assert_error(post(server, make_files(dev_set), data), status, *words)
    if case in CODES:
        assert error["code"] == CODES[case]
    if case in PARAMS:
        assert error["param"] == PARAMS[case]


@pytest.mark.parametrize(("rate", "seconds"), [(1000, 1.0), (768000, 0.2)])
def test_sample_rates_at_the_documented_limits_are_read(server, rate: int, seconds: float) -> None:
    response = post(server, {"file": ("a.wav", tone_wav(rate, seconds))}, {"response_format": "verbose_json"})
    assert response.status_code == 200, response.text
    assert abs(response.json()["duration"] - seconds) < 0.01


def test_prompt_of_4096_characters_is_taken(server) -> None:
    response = post(server, {"file": ("a.wav", wav_bytes(16000))}, {"prompt": "word " * 819 + "a"})
    assert response.status_code == 200, response.text


def test_file_with_a_cut_off_tail_is_transcribed_up_to_the_cut(server, dev_set) -> None:
    clip = next(c for c in dev_set if c.path.name == "vctk_p225_020.opus")
    data = clip.path.read_bytes()
    response = post(
        server, {"file": ("a.opus", data[: len(data) * 6 // 10])}, {"response_format": "verbose_json"}
    )  # the last 40% of the bytes cut off, mid-page
    assert response.status_code == 200, response.text
    body = response.json()
    assert clip.duration_s * 0.4 < body["duration"] < clip.duration_s * 0.8, body["duration"]
    assert normalise(body["text"]).startswith("many complicated"), body["text"]


def test_oversize_upload_gets_413(server) -> None:
    big = b"\0" * (26 * 1024 * 1024)
    error = assert_error(post(server, {"file": ("big.wav", big)}), 413, "--max-upload-mb")
    assert error["code"] == "file_too_large"


def test_streaming_wav_header_with_huge_declared_length_is_read_to_its_real_end(server) -> None:
    # Streaming WAV writers declare 0xFFFFFFFF bytes on purpose: the real data decides the length.
    response = httpx.post(
        server.base_url + "/v1/audio/transcriptions",
        files={"file": ("a.wav", wav_bytes(16000, 2.0, declared_data_len=0xFFFFFFF0))},
        data={"model": "whisper-1", "response_format": "verbose_json"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert abs(response.json()["duration"] - 2.0) < 0.01


def test_json_body_instead_of_multipart(server) -> None:
    response = httpx.post(server.base_url + "/v1/audio/transcriptions", json={"model": "whisper-1"}, timeout=10)
    assert_error(response, 400, "multipart")


def test_unknown_route_is_openai_json(server) -> None:
    assert_error(httpx.get(server.base_url + "/v1/nothing-here", timeout=10), 404, "no route")


def test_server_still_serves_after_bad_input_sent_at_once(server, client, dev_set) -> None:
    # Every case at once, twice over: each still gets its own status and OpenAI error JSON.
    def send(case: str) -> tuple[str, httpx.Response]:
        make_files, data, _, _ = CASES[case]
        return case, post(server, make_files(dev_set), data)

    with ThreadPoolExecutor(len(CASES)) as pool:
        answers = list(pool.map(send, sorted(CASES) * 2))
    for case, response in answers:
        _, _, status, words = CASES[case]
        assert_error(response, status, *words)
    assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    assert "forward" in client.audio.transcriptions.create(model="whisper-1", file=clip.path.open("rb")).text.lower()
