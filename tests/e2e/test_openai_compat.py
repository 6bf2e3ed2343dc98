"""What current openai clients send and expect (docs/openai-compatibility.md), through the official SDK:
token log-probabilities, token usage at the end of a stream, keywords, the voice object, instructions, CORS,
and the Realtime transcription session's G.711 input, semantic_vad, noise_reduction, logprobs and item events."""

from __future__ import annotations

import asyncio
import base64
import contextlib
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
from openai import AsyncOpenAI

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
    with pytest.raises(openai.BadRequestError) as err:  # as long as a prompt may be, no longer
        client.audio.transcriptions.create(model="whisper-1", file=NAMES.open("rb"), keywords=["word " * 100] * 9)
    assert err.value.body["param"] == "keywords" and "4096 characters" in err.value.body["message"]


def test_speech_takes_the_voice_as_an_object_and_accepts_instructions(client) -> None:
    text = "Good morning, and welcome."
    by_object = client.audio.speech.create(
        model="gpt-4o-mini-tts", voice={"id": "joe"}, input=text, response_format="wav", instructions="Speak calmly."
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


# --- realtime: OpenAI's GA transcription session ------------------------------------------------


def _ulaw(pcm: np.ndarray) -> bytes:
    """int16 samples as G.711 mu-law bytes: each sample's nearest code (the server's table, inverted)."""
    from voxlane.audio.live import G711

    table = G711["pcmu"].astype(np.int32)
    order = np.argsort(table)
    at = np.clip(np.searchsorted(table[order], pcm.astype(np.int32)), 1, 255)
    below, above = order[at - 1], order[at]
    nearer = np.where(np.abs(table[below] - pcm) <= np.abs(table[above] - pcm), below, order[at])
    return nearer.astype(np.uint8).tobytes()


def _clip_pcm(path: Path, rate: int) -> np.ndarray:
    from voxlane.audio.decode import decode_audio
    from voxlane.audio.resample import resamplers

    samples = decode_audio(path.read_bytes(), 600.0).samples
    return (np.clip(resamplers.resample(samples, 16000, rate), -1, 1) * 32767).astype(np.int16)


async def _events_until(conn, last: str, timeout_s: float = 60.0) -> list[dict]:
    """Events from the openai SDK's realtime connection, as the JSON the server sent, up to ``last``."""
    seen = []
    async with asyncio.timeout(timeout_s):
        async for event in conn:
            seen.append(event.model_dump(exclude_unset=True))
            if seen[-1]["type"] == "error":
                pytest.fail(f"error event: {seen[-1]['error']}")
            if seen[-1]["type"] == last:
                return seen
    raise AssertionError(f"the connection closed before {last}")


@contextlib.asynccontextmanager
async def _connect(server: ServerProcess, update: dict):
    """The openai SDK's realtime client on a transcription session that took ``update``; yields the connection
    and the events up to ``session.updated``."""
    sdk = AsyncOpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    async with sdk.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await _events_until(conn, "session.created")
        await conn.session.update(session={"type": "transcription", **update})
        yield conn, await _events_until(conn, "session.updated")


async def _session(server: ServerProcess, update: dict, chunks: list[bytes], last: str | None) -> list[dict]:
    """Events of a session that takes ``update``, then the chunks, then a commit, up to ``last`` (None: only
    what the update is answered with)."""
    async with _connect(server, update) as (conn, seen):
        if last is None:
            return seen
        for chunk in chunks:
            await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
        await conn.input_audio_buffer.commit()
        return seen + await _events_until(conn, last)


def test_realtime_takes_g711_mu_law_and_returns_logprobs_and_ga_item_events(server: ServerProcess) -> None:
    pcm = _clip_pcm(CLEAN, 8000)
    ulaw = _ulaw(pcm)
    update = {
        "audio": {"input": {"format": {"type": "audio/pcmu"}, "turn_detection": None}},
        "include": ["item.input_audio_transcription.logprobs"],
    }
    chunks = [ulaw[i : i + 800] for i in range(0, len(ulaw), 800)]  # 0.1 s each
    events = asyncio.run(_session(server, update, chunks, "conversation.item.done"))
    session = next(e for e in events if e["type"] == "session.updated")["session"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcmu"}
    assert session["include"] == ["item.input_audio_transcription.logprobs"]
    types = [e["type"] for e in events]
    committed = types.index("input_audio_buffer.committed")
    assert types[committed + 1] == "conversation.item.added"
    completed = next(e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed")
    assert "rainbow" in completed["transcript"].lower()  # 8 kHz telephone audio, read
    assert "".join(t["token"] for t in completed["logprobs"]).strip() == completed["transcript"]
    assert statistics.mean(t["logprob"] for t in completed["logprobs"]) > -1.0
    done = events[-1]
    assert (
        done["item"]["id"] == completed["item_id"]
        and done["item"]["content"][0]["transcript"] == completed["transcript"]
    )
    assert types.index("conversation.item.done") > types.index("conversation.item.input_audio_transcription.completed")


def test_realtime_semantic_vad_waits_the_silence_its_eagerness_names(server: ServerProcess) -> None:
    """eagerness low waits 1.2 s of silence before it ends a turn, high 0.3 s (server/realtime/events.py):
    after 0.8 s of silence a low-eagerness turn is still open, a high-eagerness one has ended."""
    speech = _clip_pcm(CLEAN, 24000)
    silence = np.zeros(int(0.8 * 24000), dtype=np.int16)
    audio = np.concatenate([speech, silence]).astype("<i2").tobytes()
    chunks = [audio[i : i + 4800] for i in range(0, len(audio), 4800)]

    def run(eagerness: str) -> list[dict]:
        update = {"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": eagerness}}}}

        async def go() -> list[dict]:
            async with _connect(server, update) as (conn, seen):
                for chunk in chunks:
                    await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
                # The server answers every append in order: a clear after the audio is answered after it, so
                # every speech event the audio caused has been sent before 'cleared'.
                await conn.input_audio_buffer.clear()
                return seen + await _events_until(conn, "input_audio_buffer.cleared")

        return asyncio.run(go())

    high, low = run("high"), run("low")
    assert high[0]["session"]["audio"]["input"]["turn_detection"] == {"type": "semantic_vad", "eagerness": "high"}
    assert "input_audio_buffer.speech_stopped" in [e["type"] for e in high]
    low_types = [e["type"] for e in low]
    assert "input_audio_buffer.speech_started" in low_types and "input_audio_buffer.speech_stopped" not in low_types


def test_realtime_noise_reduction_is_accepted_and_echoed(server: ServerProcess) -> None:
    from voxlane.server.realtime.events import NOISE_REDUCTION_APPLIED

    update = {"audio": {"input": {"noise_reduction": {"type": "far_field"}, "turn_detection": None}}}
    events = asyncio.run(_session(server, update, [], None))
    echoed = events[0]["session"]["audio"]["input"]["noise_reduction"]
    assert echoed == {"type": "far_field", "applied": NOISE_REDUCTION_APPLIED}
