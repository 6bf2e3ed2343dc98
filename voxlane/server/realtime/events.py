"""OpenAI's Realtime transcription protocol, the subset voxlane speaks: session settings and event JSON.

Two shapes of session configuration are accepted, and each is answered in its own:

- GA: ``{"type": "session.update", "session": {"type": "transcription", "audio": {"input": {"format":
  {"type": "audio/pcm", "rate": 24000}, "transcription": {"model", "language", "prompt"}, "turn_detection":
  {"type": "server_vad", "threshold", "prefix_padding_ms", "silence_duration_ms"} | null}}}}``, answered by
  ``session.created`` / ``session.updated``.
- Beta: ``{"type": "transcription_session.update", "session": {"input_audio_format": "pcm16",
  "input_audio_transcription": {...}, "turn_detection": {...} | null}}``, answered by
  ``transcription_session.updated``.

Only the fields present in an update change (``null`` turns turn detection off: manual commits). voxlane
adds one value: the pcm rate may be 16000 as well as OpenAI's 24000 (GA ``rate``; beta
``input_audio_format: "pcm16"`` is 24 kHz, and voxlane's ``"pcm16_16000"`` is 16 kHz). Anything it cannot
honour (g711, semantic_vad, noise reduction) is an ``error`` event naming the field and what to send.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from voxlane.audio.vad import VadOptions
from voxlane.errors import InvalidRequest, VoxlaneError

Shape = Literal["ga", "beta"]

DEFAULT_VAD = VadOptions(threshold=0.5, prefix_padding_ms=300, silence_duration_ms=500)
"""OpenAI's server_vad defaults for transcription sessions."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@dataclass(frozen=True)
class SessionSettings:
    rate: int = 24000
    model: str = "whisper-1"
    language: str | None = None
    prompt: str | None = None
    turn_detection: VadOptions | None = DEFAULT_VAD
    """None: no turn detection, the client commits."""


def _vad_json(vad: VadOptions | None) -> dict[str, Any] | None:
    if vad is None:
        return None
    return {
        "type": "server_vad",
        "threshold": vad.threshold,
        "prefix_padding_ms": vad.prefix_padding_ms,
        "silence_duration_ms": vad.silence_duration_ms,
    }


def session_json(session_id: str, settings: SessionSettings, shape: Shape, expires_at: int) -> dict[str, Any]:
    transcription = {"model": settings.model, "language": settings.language, "prompt": settings.prompt or ""}
    if shape == "beta":
        return {
            "id": session_id,
            "object": "realtime.transcription_session",
            "expires_at": expires_at,
            "input_audio_format": "pcm16" if settings.rate == 24000 else "pcm16_16000",
            "input_audio_transcription": transcription,
            "turn_detection": _vad_json(settings.turn_detection),
            "input_audio_noise_reduction": None,
            "include": [],
        }
    return {
        "id": session_id,
        "object": "realtime.transcription_session",
        "type": "transcription",
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": settings.rate},
                "transcription": transcription,
                "turn_detection": _vad_json(settings.turn_detection),
                "noise_reduction": None,
            }
        },
        "include": [],
    }


def apply_update(settings: SessionSettings, event: dict[str, Any]) -> tuple[SessionSettings, Shape]:
    """The settings after a ``session.update`` or ``transcription_session.update``; InvalidRequest (with the
    field as ``param``) for what voxlane cannot honour."""
    session = event.get("session")
    if not isinstance(session, dict):
        raise InvalidRequest("missing 'session': send an object with the session's settings", param="session")
    if event["type"] == "transcription_session.update":
        return _apply_beta(settings, session), "beta"
    kind = session.get("type", "transcription")
    if kind != "transcription":
        raise InvalidRequest(
            f"session.type '{kind}' is not served: this endpoint transcribes; send session.type 'transcription'",
            param="session.type",
        )
    audio = session.get("audio") or {}
    if not isinstance(audio, dict) or not isinstance(audio.get("input", {}), dict):
        raise InvalidRequest("'session.audio.input' must be an object", param="session.audio.input")
    source = audio.get("input", {}) or {}
    changes: dict[str, Any] = {}
    if "format" in source:
        changes["rate"] = _ga_rate(source["format"])
    if source.get("noise_reduction") is not None:
        raise InvalidRequest(
            "noise reduction is not supported; send noise_reduction null or leave it out",
            param="session.audio.input.noise_reduction",
        )
    if "transcription" in source:
        changes.update(_transcription(source["transcription"], "session.audio.input.transcription"))
    if "turn_detection" in source:
        changes["turn_detection"] = _turn_detection(source["turn_detection"], "session.audio.input.turn_detection")
    return dataclasses.replace(settings, **changes), "ga"


def _apply_beta(settings: SessionSettings, session: dict[str, Any]) -> SessionSettings:
    changes: dict[str, Any] = {}
    if "input_audio_format" in session:
        fmt = session["input_audio_format"]
        rates = {"pcm16": 24000, "pcm16_16000": 16000}
        if fmt not in rates:
            raise InvalidRequest(
                f"input_audio_format {fmt!r} is not supported; send 'pcm16' (24 kHz) or 'pcm16_16000' (16 kHz)",
                param="session.input_audio_format",
            )
        changes["rate"] = rates[fmt]
    if session.get("input_audio_noise_reduction") is not None:
        raise InvalidRequest(
            "noise reduction is not supported; send input_audio_noise_reduction null or leave it out",
            param="session.input_audio_noise_reduction",
        )
    if "input_audio_transcription" in session:
        changes.update(_transcription(session["input_audio_transcription"], "session.input_audio_transcription"))
    if "turn_detection" in session:
        changes["turn_detection"] = _turn_detection(session["turn_detection"], "session.turn_detection")
    return dataclasses.replace(settings, **changes)


def _ga_rate(fmt: Any) -> int:
    param = "session.audio.input.format"
    if not isinstance(fmt, dict) or fmt.get("type", "audio/pcm") != "audio/pcm":
        raise InvalidRequest(
            'only pcm16 is supported; send format {"type": "audio/pcm", "rate": 24000} (or rate 16000)', param=param
        )
    rate = fmt.get("rate", 24000)
    if rate not in (24000, 16000):
        raise InvalidRequest(f"rate {rate!r} is not supported; send rate 24000 or 16000", param=param + ".rate")
    return int(rate)


def _transcription(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(f"'{param}' must be an object with model, language and prompt", param=param)
    out: dict[str, Any] = {}
    for key in ("model", "language", "prompt"):
        if key in value and value[key] is not None and not isinstance(value[key], str):
            raise InvalidRequest(f"'{param}.{key}' must be a string", param=f"{param}.{key}")
    if value.get("model"):
        out["model"] = value["model"]
    if "language" in value:
        language = value["language"] or None
        if language not in (None, "en"):
            raise InvalidRequest(
                f"the server's model is English-only; send language 'en' or leave it out, not {language!r}",
                param=f"{param}.language",
            )
        out["language"] = language
    if "prompt" in value:
        prompt = value["prompt"] or None
        if prompt is not None and len(prompt) > 4096:
            raise InvalidRequest("prompt is longer than 4096 characters", param=f"{param}.prompt")
        out["prompt"] = prompt
    return out


def _turn_detection(value: Any, param: str) -> VadOptions | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type", "server_vad") != "server_vad":
        kind = value.get("type") if isinstance(value, dict) else value
        raise InvalidRequest(
            f'turn_detection {kind!r} is not supported; send {{"type": "server_vad"}} (threshold, '
            "prefix_padding_ms, silence_duration_ms) or null for manual commits",
            param=f"{param}.type",
        )
    threshold = value.get("threshold", DEFAULT_VAD.threshold)
    padding = value.get("prefix_padding_ms", DEFAULT_VAD.prefix_padding_ms)
    silence = value.get("silence_duration_ms", DEFAULT_VAD.silence_duration_ms)
    if not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise InvalidRequest("threshold must be a number from 0 to 1", param=f"{param}.threshold")
    for name, ms in (("prefix_padding_ms", padding), ("silence_duration_ms", silence)):
        if not isinstance(ms, int) or not 0 <= ms <= 10000:
            raise InvalidRequest(
                f"{name} must be a whole number of milliseconds from 0 to 10000", param=f"{param}.{name}"
            )
    return VadOptions(float(threshold), int(padding), max(32, int(silence)))


def error_event(error: VoxlaneError, event_id: str | None = None) -> dict[str, Any]:
    """OpenAI's ``error`` event; the socket stays open."""
    return {
        "type": "error",
        "event_id": new_id("event"),
        "error": {
            "type": error.error_type,
            "code": error.code,
            "message": error.message,
            "param": error.param,
            "event_id": event_id,
        },
    }


def expiry(max_session_s: float) -> int:
    return int(time.time() + max_session_s)
