"""One request of each backend, timed: ``openai-audio`` (POST /v1/audio/transcriptions) and
``openai-audio-speech`` (POST /v1/audio/speech). They speak OpenAI's wire format only, so they measure any
server that does.

A request never raises: whatever goes wrong (refused connection, timeout, a non-2xx status, an error
event in a stream, a body that cannot be read) is a failed :class:`RequestOutput` with the error text.
All times are ``time.perf_counter()`` seconds.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from voxlane.audio.encode import wav_header
from voxlane.bench.datasets import AudioSample, TextSample
from voxlane.bench.http import RawClient, RawResponse
from voxlane.bench.options import BACKENDS

MAX_ERROR_CHARS = 500


@dataclass
class RequestOutput:
    success: bool = False
    error: str = ""
    start_s: float = 0.0
    """When the request was sent."""
    end_s: float = 0.0
    """When the last body byte arrived (or the failure was seen)."""
    input_audio_s: float = 0.0
    """Transcription: seconds of audio sent."""
    reference: str | None = None
    """Transcription: the reference transcript; speech: the input text."""
    text: str = ""
    """Transcription: the transcript received."""
    ttft_s: float | None = None
    """Streaming transcription: from sending to the first text delta."""
    chunk_arrivals_s: list[float] = field(default_factory=list)
    """Streaming transcription: arrival of each text delta."""
    ttfp_s: float | None = None
    """Speech: from sending to the first byte of audio in the body."""
    audio_chunks: list[tuple[float, float]] = field(default_factory=list)
    """Speech: (arrival_s, seconds of audio) of each body chunk carrying audio (pcm and wav only)."""
    output_audio_s: float = 0.0
    """Speech: seconds of audio received."""
    audio: bytes | None = None
    """Speech: the audio as a WAV file (or as received, when compressed), kept only for --asr-check-url."""
    encoded_audio: bytes | None = None
    """Speech in a compressed format, until :func:`finish` has measured its duration."""

    @property
    def latency_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class RequestSpec:
    """What stays the same across the requests of a run."""

    base_url: str
    model: str
    extra_body: dict[str, Any]
    timeout_s: float
    voice: str = "joe"
    response_format: str = "pcm"
    """Speech: pcm or wav give the continuity figures; other formats give totals only."""
    sample_rate: int = 22050
    """Speech, pcm: samples per second of the returned audio (16-bit mono)."""
    keep_audio: bool = False


@dataclass(frozen=True)
class Prepared:
    """A request body encoded before the timed run, so that the clock measures sending, not encoding."""

    item: Any
    """The AudioSample or TextSample it was made from."""
    body: bytes
    content_type: str


RequestFn = Callable[[RawClient, RequestSpec, Prepared], Awaitable[RequestOutput]]


def request_fn(backend: str) -> RequestFn:
    if backend == "openai-audio":
        return transcribe
    if backend == "openai-audio-speech":
        return synthesise
    raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")


def prepare(backend: str, spec: RequestSpec, item: Any) -> Prepared:
    if backend == "openai-audio":
        return prepare_transcription(spec, item)
    return prepare_speech(spec, item)


def _timeout(spec: RequestSpec) -> float:
    """Seconds any one step (connect, send, each read) may take."""
    return spec.timeout_s


def _exception_text(exc: Exception) -> str:
    detail = str(exc)
    return (f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__)[:MAX_ERROR_CHARS]


def _error_text(status: int, body: bytes) -> str:
    return f"HTTP {status}: {body.decode('utf-8', 'replace')[:MAX_ERROR_CHARS]}"


async def _sse_events(response: RawResponse) -> AsyncIterator[tuple[float, dict[str, Any]]]:
    """(arrival_s, payload) of each ``data:`` line; stops at ``[DONE]``."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        now = time.perf_counter()
        try:
            yield now, json.loads(data)
        except json.JSONDecodeError:
            raise ValueError(f"a stream event is not JSON: {data[:200]!r}") from None


# --- transcription -----------------------------------------------------------------------------------


def _transcription_fields(spec: RequestSpec) -> dict[str, Any]:
    return {"model": spec.model, "response_format": "json", **spec.extra_body}


def prepare_transcription(spec: RequestSpec, sample: AudioSample) -> Prepared:
    """The multipart/form-data body: the fields, then the file."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in _transcription_fields(spec).items():
        for v in value if isinstance(value, list) else [value]:
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'
                f"{_form_value(v)}\r\n".encode()
            )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{_quote(sample.name)}"'
        f"\r\nContent-Type: application/octet-stream\r\n\r\n".encode()
    )
    parts += [sample.data, f"\r\n--{boundary}--\r\n".encode()]
    return Prepared(sample, b"".join(parts), f"multipart/form-data; boundary={boundary}")


def _quote(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _post(client: RawClient, spec: RequestSpec, path: str, prepared: Prepared) -> Any:
    """The timed request: POST the prepared body, streaming the response."""
    return client.stream(
        "POST",
        spec.base_url + path,
        content=prepared.body,
        headers={"Content-Type": prepared.content_type},
        timeout=_timeout(spec),
    )


async def transcribe(client: RawClient, spec: RequestSpec, prepared: Prepared) -> RequestOutput:
    sample: AudioSample = prepared.item
    stream = str(_transcription_fields(spec).get("stream", "")).lower() == "true"
    out = RequestOutput(input_audio_s=sample.duration_s, reference=sample.text)
    out.start_s = time.perf_counter()
    try:
        async with _post(client, spec, "/v1/audio/transcriptions", prepared) as response:
            if response.status_code != 200:
                out.error = _error_text(response.status_code, await response.aread())
            elif stream:
                await _read_transcription_stream(response, out)
            else:
                body = await response.aread()
                out.end_s = time.perf_counter()
                out.text = _transcript_text(body, response.headers.get("content-type", ""))
                out.success = True
    except Exception as exc:
        out.error = _exception_text(exc)
        out.success = False
    out.end_s = out.end_s or time.perf_counter()
    return out


async def _read_transcription_stream(response: RawResponse, out: RequestOutput) -> None:
    deltas: list[str] = []
    async for now, event in _sse_events(response):
        kind = event.get("type")
        if kind == "transcript.text.delta":
            if out.ttft_s is None:
                out.ttft_s = now - out.start_s
            out.chunk_arrivals_s.append(now)
            deltas.append(event.get("delta", ""))
        elif kind == "transcript.text.done":
            out.text = event.get("text", "".join(deltas))
            out.success = True
            return
        elif "error" in event or kind == "error":
            out.error = f"error event in the stream: {json.dumps(event)[:MAX_ERROR_CHARS]}"
            return
    out.error = "the stream ended without a transcript.text.done event"


def _form_value(value: Any) -> str:
    """An --extra-body value as a multipart field: true/false, objects as JSON, the rest as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _transcript_text(body: bytes, content_type: str) -> str:
    if "json" in content_type:
        return str(json.loads(body)["text"])
    return body.decode("utf-8", "replace").strip()


# --- speech ------------------------------------------------------------------------------------------


def _speech_payload(spec: RequestSpec, sample: TextSample) -> dict[str, Any]:
    return {
        "model": spec.model,
        "input": sample.text,
        "voice": spec.voice,
        "response_format": spec.response_format,
        **spec.extra_body,
    }


def prepare_speech(spec: RequestSpec, sample: TextSample) -> Prepared:
    return Prepared(sample, json.dumps(_speech_payload(spec, sample)).encode(), "application/json")


async def synthesise(client: RawClient, spec: RequestSpec, prepared: Prepared) -> RequestOutput:
    sample: TextSample = prepared.item
    payload = _speech_payload(spec, sample)
    fmt = str(payload["response_format"])
    sse = payload.get("stream_format") == "sse"
    decoder = _AudioBytes(fmt, int(payload.get("sample_rate") or spec.sample_rate))
    out = RequestOutput(reference=sample.text)
    out.start_s = time.perf_counter()
    try:
        async with _post(client, spec, "/v1/audio/speech", prepared) as response:
            if response.status_code != 200:
                out.error = _error_text(response.status_code, await response.aread())
            else:
                chunks = _sse_audio(response, out) if sse else _raw_audio(response)
                async for now, chunk in chunks:
                    audio_s = decoder.feed(chunk)
                    if audio_s is None or audio_s > 0:
                        if out.ttfp_s is None:
                            out.ttfp_s = now - out.start_s
                        if audio_s:
                            out.audio_chunks.append((now, audio_s))
                out.end_s = time.perf_counter()
                if not out.error:
                    out.success = decoder.received > 0
                    if not out.success:
                        out.error = "the response held no audio"
                    if decoder.timed:
                        out.output_audio_s = decoder.total_s()
                    else:  # decoding mp3/opus/... would block the loop mid-run: finish() does it afterwards
                        out.encoded_audio = bytes(decoder.body)
                    if spec.keep_audio:
                        out.audio = decoder.as_wav()
    except Exception as exc:
        out.error = _exception_text(exc)
        out.success = False
    out.end_s = out.end_s or time.perf_counter()
    return out


def finish(out: RequestOutput) -> None:
    """After the timed run: the duration of compressed speech (mp3, opus, aac, flac), by decoding it."""
    if out.encoded_audio is None:
        return
    from voxlane.audio.decode import decode_audio

    try:
        out.output_audio_s = decode_audio(out.encoded_audio, 24 * 3600.0).duration_s
    except Exception as exc:
        out.success, out.error = False, f"the audio could not be decoded: {_exception_text(exc)}"
    out.encoded_audio = None


async def _raw_audio(response: RawResponse) -> AsyncIterator[tuple[float, bytes]]:
    async for chunk in response.aiter_raw():
        if chunk:
            yield time.perf_counter(), chunk


async def _sse_audio(response: RawResponse, out: RequestOutput) -> AsyncIterator[tuple[float, bytes]]:
    async for now, event in _sse_events(response):
        kind = event.get("type")
        if kind == "speech.audio.delta":
            yield now, base64.b64decode(event.get("audio", ""))
        elif kind == "speech.audio.done":
            return
        elif "error" in event or kind == "error":
            out.error = f"error event in the stream: {json.dumps(event)[:MAX_ERROR_CHARS]}"
            return


class _AudioBytes:
    """Counts the audio seconds in a byte stream as it arrives.

    pcm: 16-bit mono at ``sample_rate``. wav: the header's rate, channels and sample width (a streamed
    wav may declare a placeholder data size, so the size is taken from the bytes received). Other formats
    (mp3, opus, aac, flac) cannot be timed chunk by chunk: ``feed`` returns None and the total comes from
    decoding the whole body at the end.
    """

    def __init__(self, fmt: str, sample_rate: int) -> None:
        self.fmt = fmt
        self.rate = sample_rate
        self.bytes_per_s = 2.0 * sample_rate
        self.header = bytearray()
        self.header_done = fmt == "pcm"
        self.pcm = bytearray()
        self.body = bytearray()
        self.received = 0

    def feed(self, chunk: bytes) -> float | None:
        if self.fmt not in ("pcm", "wav"):
            self.body += chunk
            self.received += len(chunk)
            return None
        if not self.header_done:
            self.header += chunk
            parsed = _parse_wav_header(bytes(self.header))
            if parsed is None:
                return 0.0
            offset, rate, channels, width = parsed
            self.rate, self.bytes_per_s = rate, float(rate * channels * width)
            self.header_done = True
            chunk = bytes(self.header[offset:])
        self.pcm += chunk
        self.received += len(chunk)
        return len(chunk) / self.bytes_per_s

    @property
    def timed(self) -> bool:
        """Whether chunks can be timed as they arrive (pcm, wav)."""
        return self.fmt in ("pcm", "wav")

    def total_s(self) -> float:
        return len(self.pcm) / self.bytes_per_s

    def as_wav(self) -> bytes:
        if self.fmt not in ("pcm", "wav"):
            return bytes(self.body)
        channels = 1 if self.fmt == "pcm" else max(1, round(self.bytes_per_s / self.rate / 2))
        return wav_header(self.rate, channels, data_bytes=len(self.pcm)) + bytes(self.pcm)


def _parse_wav_header(data: bytes) -> tuple[int, int, int, int] | None:
    """(offset of the samples, rate, channels, bytes per sample) once the header is complete, else None."""
    if len(data) < 12:
        return None
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("response_format=wav but the body is not a RIFF/WAVE file")
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        cid, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        if cid == b"fmt ":
            if pos + 8 + 16 > len(data):
                return None
            _, channels, rate, _, _, bits = struct.unpack("<HHIIHH", data[pos + 8 : pos + 24])
            fmt = (rate, channels, bits // 8)
        elif cid == b"data":
            if fmt is None:
                raise ValueError("the wav body has a data chunk before its fmt chunk")
            return pos + 8, *fmt
        pos += 8 + size + (size & 1)
    return None
