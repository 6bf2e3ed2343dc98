"""What current openai clients send and expect (docs/openai-compatibility.md), through the official SDK:
token log-probabilities, token usage at the end of a stream, keywords, the voice object, instructions, CORS."""

from __future__ import annotations

import io
import json
import statistics
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from tests.conftest import DEV_DIR, ServerProcess, running_server

CLEAN = DEV_DIR / "audio" / "vctk_p225_020.opus"
"""Clear read speech, 5.3 s: 'Many complicated ideas about the rainbow have been formed.'"""
NAMES = DEV_DIR / "audio" / "mfa_creaky.wav"
"""'Montreal Forced Aligner', which the bundled model reads as 'Montreal, forced liner.' without help."""


def _mean_logprob(logprobs) -> float:
    return statistics.mean(t.logprob for t in logprobs)


@pytest.fixture(scope="module")
def noisy_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CLEAN under white noise at 0 dB SNR: still readable, but the decoder is much less sure of it."""
    with av.open(str(CLEAN)) as container:
        frames = [f.to_ndarray().mean(axis=0) for f in container.decode(audio=0)]
        rate = container.streams.audio[0].rate
    speech = np.concatenate(frames).astype(np.float64)
    noise = np.random.default_rng(7).standard_normal(len(speech)) * np.sqrt(np.mean(speech**2))
    path = tmp_path_factory.mktemp("noisy") / "noisy.wav"
    sf.write(path, (speech + noise) / (np.abs(speech + noise).max() * 1.1), rate)
    return path


def test_logprobs_of_a_clean_clip_are_confident_and_of_a_noisy_one_less(client, noisy_clip: Path) -> None:
    clean = client.audio.transcriptions.create(model="whisper-1", file=CLEAN.open("rb"), include=["logprobs"])
    noisy = client.audio.transcriptions.create(model="whisper-1", file=noisy_clip.open("rb"), include=["logprobs"])
    assert "rainbow" in clean.text.lower()
    # One entry per token: the tokens spell the text, their bytes are the token's UTF-8.
    assert "".join(t.token for t in clean.logprobs).strip() == clean.text
    assert all(bytes(int(b) for b in t.bytes).decode() == t.token for t in clean.logprobs)
    assert all(t.logprob <= 0 for t in clean.logprobs + noisy.logprobs)
    print(f"mean token logprob: clean {_mean_logprob(clean.logprobs):.3f}, noisy {_mean_logprob(noisy.logprobs):.3f}")
    assert _mean_logprob(clean.logprobs) > -0.5
    assert _mean_logprob(noisy.logprobs) < _mean_logprob(clean.logprobs) - 0.1


def test_without_include_there_are_no_logprobs(server: ServerProcess) -> None:
    r = httpx.post(
        server.base_url + "/v1/audio/transcriptions",
        files={"file": ("clean.opus", CLEAN.read_bytes())},
        data={"model": "whisper-1"},
        timeout=120,
    )
    assert r.status_code == 200 and "logprobs" not in r.json() and r.json()["text"]


def test_a_stream_carries_logprobs_per_delta_and_token_usage_at_the_end(client) -> None:
    events = list(
        client.audio.transcriptions.create(model="whisper-1", file=CLEAN.open("rb"), include=["logprobs"], stream=True)
    )
    deltas, done = events[:-1], events[-1]
    assert deltas and all(e.type == "transcript.text.delta" and e.logprobs for e in deltas)
    assert done.type == "transcript.text.done"
    assert [t.token for e in deltas for t in e.logprobs] == [t.token for t in done.logprobs]
    with av.open(str(CLEAN)) as container:
        duration_s = float(container.duration) / av.time_base
    usage = done.usage
    assert usage.type == "tokens"
    assert usage.input_tokens == usage.input_token_details.audio_tokens
    assert abs(usage.input_tokens - duration_s * 50) <= 2  # 50 a second (the container's duration, +- opus padding)
    assert usage.output_tokens == len(done.logprobs)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


def test_logprobs_need_the_json_format(client) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.audio.transcriptions.create(
            model="whisper-1", file=CLEAN.open("rb"), include=["logprobs"], response_format="verbose_json"
        )
    assert err.value.body["param"] == "include" and "response_format='json'" in err.value.body["message"]


def test_keywords_steer_the_spelling_of_names_and_languages_is_accepted(client) -> None:
    plain = client.audio.transcriptions.create(model="whisper-1", file=NAMES.open("rb"))
    steered = client.audio.transcriptions.create(
        model="whisper-1", file=NAMES.open("rb"), keywords=["Montreal Forced Aligner"], languages=["en"]
    )
    assert "Aligner" not in plain.text  # the bundled model alone mishears it
    assert "Montreal Forced Aligner" in steered.text


def test_speech_takes_the_voice_as_an_object_and_accepts_instructions(client) -> None:
    text = "Good morning, and welcome."
    by_object = client.audio.speech.create(
        model="tts-1", voice={"id": "joe"}, input=text, response_format="wav", instructions="Speak calmly."
    )
    with av.open(io.BytesIO(by_object.content)) as container:
        assert sum(f.samples for f in container.decode(audio=0)) > 0.5 * container.streams.audio[0].rate
    with pytest.raises(openai.BadRequestError) as err:
        client.audio.speech.create(model="tts-1", voice={"name": "joe"}, input=text)  # type: ignore[arg-type]
    assert err.value.body["param"] == "voice" and '{"id": name}' in err.value.body["message"]


@pytest.fixture(scope="module")
def cors_server() -> Iterator[ServerProcess]:
    with running_server("--cors-allow-origins", "https://app.example", "--api-key", "sk-cors-test-key") as srv:
        yield srv


def test_cors_preflight_is_answered_and_keys_are_still_checked(cors_server: ServerProcess) -> None:
    url = cors_server.base_url + "/v1/audio/transcriptions"
    origin = {"Origin": "https://app.example"}
    preflight = httpx.options(
        url,
        headers={**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"},
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()

    models = cors_server.base_url + "/v1/models"
    refused = httpx.get(models, headers=origin)
    assert refused.status_code == 401  # no key: refused, with the headers a browser needs to read why
    assert refused.headers["access-control-allow-origin"] == "https://app.example"
    allowed = httpx.get(models, headers={**origin, "Authorization": "Bearer sk-cors-test-key"})
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "https://app.example"

    stranger = httpx.get(
        models, headers={"Origin": "https://other.example", "Authorization": "Bearer sk-cors-test-key"}
    )
    assert "access-control-allow-origin" not in stranger.headers


def test_cors_is_off_by_default(server: ServerProcess) -> None:
    r = httpx.options(
        server.base_url + "/v1/audio/transcriptions",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in r.headers
    assert r.status_code in (404, 405)


def test_every_sdk_field_is_implemented_or_listed_as_ignored() -> None:
    """The installed openai SDK's request fields against docs/openai-compatibility.md's table."""
    from tests.sdk_fields import sdk_fields, table_rows

    rows = table_rows()
    missing = sorted(f for f in sdk_fields() if f not in rows)
    assert not missing, f"fields the openai SDK sends that docs/openai-compatibility.md does not list: {missing}"
    unexplained = sorted(f for f, (status, why) in rows.items() if status != "yes" and not why.strip())
    assert not unexplained, f"fields listed as not implemented without a reason: {unexplained}"
    print(json.dumps({f: s for f, (s, _) in sorted(rows.items())}, indent=0))
