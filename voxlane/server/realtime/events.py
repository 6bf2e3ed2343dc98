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
``input_audio_format: "pcm16"`` is 24 kHz, and voxlane's ``"pcm16_16000"`` is 16 kHz). G.711 (``audio/pcmu``,
``audio/pcma``; beta ``g711_ulaw``, ``g711_alaw``) is 8 kHz. ``semantic_vad`` maps its ``eagerness`` onto the
silence that ends a turn (SEMANTIC_SILENCE_MS); ``noise_reduction`` is accepted and echoed, applied only if
NOISE_REDUCTION_APPLIED. Anything else it cannot honour is an ``error`` event naming the field and what to
send.
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


SEMANTIC_SILENCE_MS = {"low": 1200, "medium": 600, "auto": 600, "high": 300}
"""``semantic_vad``'s ``eagerness`` as the silence that ends a turn. OpenAI's semantic VAD judges with a model
whether the speaker has finished (and waits up to 8, 4 or 2 s); voxlane has no such model and waits this
long after speech instead: low waits for a speaker who pauses to think, high ends turns as server_vad's
shortest useful setting does."""
NOISE_REDUCTION_TYPES = ("near_field", "far_field")
NOISE_REDUCTION_APPLIED = False
"""Whether ``noise_reduction`` changes the audio: only where the spectral gate (audio/denoise.py) was measured
to help Whisper (docs/realtime.md, "Noise reduction: not applied"); otherwise the setting is accepted and
echoed back with ``"applied": false``."""
LOGPROBS_INCLUDE = "item.input_audio_transcription.logprobs"
GA_FORMATS = {"audio/pcm": "pcm16", "audio/pcmu": "pcmu", "audio/pcma": "pcma"}
BETA_FORMATS = {
    "pcm16": ("pcm16", 24000),
    "pcm16_16000": ("pcm16", 16000),
    "g711_ulaw": ("pcmu", 8000),
    "g711_alaw": ("pcma", 8000),
}


@dataclass(frozen=True)
class SessionSettings:
    rate: int = 24000
    encoding: str = "pcm16"
    """pcm16, or G.711's pcmu / pcma (8 kHz)."""
    model: str = "whisper-1"
    language: str | None = None
    prompt: str | None = None
    turn_detection: VadOptions | None = DEFAULT_VAD
    """None: no turn detection, the client commits."""
    eagerness: str | None = None
    """Set when turn detection came as ``semantic_vad`` (it is echoed back so)."""
    noise_reduction: str | None = None
    """near_field or far_field, as the client asked (see NOISE_REDUCTION_APPLIED)."""
    logprobs: bool = False
    """``include: ["item.input_audio_transcription.logprobs"]``: finals and deltas carry token logprobs."""


def _vad_json(vad: VadOptions | None, eagerness: str | None = None) -> dict[str, Any] | None:
    if vad is None:
        return None
    if eagerness is not None:
        return {"type": "semantic_vad", "eagerness": eagerness}
    return {
        "type": "server_vad",
        "threshold": vad.threshold,
        "prefix_padding_ms": vad.prefix_padding_ms,
        "silence_duration_ms": vad.silence_duration_ms,
    }


def session_json(session_id: str, settings: SessionSettings, shape: Shape, expires_at: int) -> dict[str, Any]:
    transcription = {"model": settings.model, "language": settings.language, "prompt": settings.prompt or ""}
    turn_detection = _vad_json(settings.turn_detection, settings.eagerness)
    noise_reduction = (
        {"type": settings.noise_reduction, "applied": NOISE_REDUCTION_APPLIED} if settings.noise_reduction else None
    )
    include = [LOGPROBS_INCLUDE] if settings.logprobs else []
    if shape == "beta":
        beta_format = next(k for k, v in BETA_FORMATS.items() if v == (settings.encoding, settings.rate))
        return {
            "id": session_id,
            "object": "realtime.transcription_session",
            "expires_at": expires_at,
            "input_audio_format": beta_format,
            "input_audio_transcription": transcription,
            "turn_detection": turn_detection,
            "input_audio_noise_reduction": noise_reduction,
            "include": include,
        }
    ga_format: dict[str, Any] = {"type": next(k for k, v in GA_FORMATS.items() if v == settings.encoding)}
    if settings.encoding == "pcm16":
        ga_format["rate"] = settings.rate
    return {
        "id": session_id,
        "object": "realtime.transcription_session",
        "type": "transcription",
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": ga_format,
                "transcription": transcription,
                "turn_detection": turn_detection,
                "noise_reduction": noise_reduction,
            }
        },
        "include": include,
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
        changes.update(_ga_format(source["format"]))
    if "noise_reduction" in source:
        changes["noise_reduction"] = _noise_reduction(source["noise_reduction"], "session.audio.input.noise_reduction")
    if "transcription" in source:
        changes.update(_transcription(source["transcription"], "session.audio.input.transcription"))
    if "turn_detection" in source:
        changes.update(_turn_detection(source["turn_detection"], "session.audio.input.turn_detection"))
    if "include" in session:
        changes["logprobs"] = _include(session["include"])
    return dataclasses.replace(settings, **changes), "ga"


def _apply_beta(settings: SessionSettings, session: dict[str, Any]) -> SessionSettings:
    changes: dict[str, Any] = {}
    if "input_audio_format" in session:
        fmt = session["input_audio_format"]
        if fmt not in BETA_FORMATS:
            raise InvalidRequest(
                f"input_audio_format {fmt!r} is not supported; send 'pcm16' (24 kHz), 'pcm16_16000' (16 kHz), "
                "'g711_ulaw' or 'g711_alaw'",
                param="session.input_audio_format",
            )
        changes["encoding"], changes["rate"] = BETA_FORMATS[fmt]
    if "input_audio_noise_reduction" in session:
        changes["noise_reduction"] = _noise_reduction(
            session["input_audio_noise_reduction"], "session.input_audio_noise_reduction"
        )
    if "input_audio_transcription" in session:
        changes.update(_transcription(session["input_audio_transcription"], "session.input_audio_transcription"))
    if "turn_detection" in session:
        changes.update(_turn_detection(session["turn_detection"], "session.turn_detection"))
    if "include" in session:
        changes["logprobs"] = _include(session["include"])
    return dataclasses.replace(settings, **changes)


def _ga_format(fmt: Any) -> dict[str, Any]:
    param = "session.audio.input.format"
    kind = fmt.get("type", "audio/pcm") if isinstance(fmt, dict) else fmt
    if kind not in GA_FORMATS:
        raise InvalidRequest(
            f'format {kind!r} is not supported; send {{"type": "audio/pcm", "rate": 24000}} (or rate 16000), '
            '{"type": "audio/pcmu"} or {"type": "audio/pcma"}',
            param=param,
        )
    encoding = GA_FORMATS[kind]
    if encoding != "pcm16":
        return {"encoding": encoding, "rate": 8000}  # G.711 is 8 kHz
    rate = fmt.get("rate", 24000)
    if rate not in (24000, 16000):
        raise InvalidRequest(f"rate {rate!r} is not supported; send rate 24000 or 16000", param=param + ".rate")
    return {"encoding": encoding, "rate": int(rate)}


def _noise_reduction(value: Any, param: str) -> str | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in NOISE_REDUCTION_TYPES:
        raise InvalidRequest(
            f'noise_reduction type {kind!r} is not known; send {{"type": "near_field"}}, {{"type": "far_field"}} '
            "or null",
            param=f"{param}.type",
        )
    return str(kind)


def _include(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, list) or any(item != LOGPROBS_INCLUDE for item in value):
        raise InvalidRequest(f"include may hold only {LOGPROBS_INCLUDE!r}", param="session.include")
    return bool(value)


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
    if "language" in value:  # the session checks it against its model (English-only models take only 'en')
        out["language"] = value["language"] or None
    if "prompt" in value:
        prompt = value["prompt"] or None
        if prompt is not None and len(prompt) > 4096:
            raise InvalidRequest("prompt is longer than 4096 characters", param=f"{param}.prompt")
        out["prompt"] = prompt
    return out


def _turn_detection(value: Any, param: str) -> dict[str, Any]:
    """The settings' ``turn_detection`` and ``eagerness`` for a turn_detection object (or null)."""
    if value is None:
        return {"turn_detection": None, "eagerness": None}
    kind = value.get("type", "server_vad") if isinstance(value, dict) else value
    if kind == "semantic_vad":
        eagerness = value.get("eagerness") or "auto"
        if eagerness not in SEMANTIC_SILENCE_MS:
            raise InvalidRequest(
                f"eagerness {eagerness!r} is not known; send low, medium, high or auto", param=f"{param}.eagerness"
            )
        silence = SEMANTIC_SILENCE_MS[eagerness]
        vad = VadOptions(DEFAULT_VAD.threshold, DEFAULT_VAD.prefix_padding_ms, silence)
        return {"turn_detection": vad, "eagerness": eagerness}
    if kind != "server_vad":
        raise InvalidRequest(
            f'turn_detection {kind!r} is not supported; send {{"type": "server_vad"}} (threshold, '
            'prefix_padding_ms, silence_duration_ms), {"type": "semantic_vad"} (eagerness) or null for manual '
            "commits",
            param=f"{param}.type",
        )
    return {"turn_detection": _server_vad(value, param), "eagerness": None}


def _server_vad(value: dict[str, Any], param: str) -> VadOptions:
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


def item_json(item_id: str, status: str, transcript: str | None) -> dict[str, Any]:
    """The user's audio message that a turn becomes (OpenAI's conversation item)."""
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": status,
        "role": "user",
        "content": [{"type": "input_audio", "transcript": transcript}],
    }


def speech_started_event(item_id: str, audio_start_ms: int) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_started",
        "event_id": new_id("event"),
        "item_id": item_id,
        "audio_start_ms": audio_start_ms,
    }


def speech_stopped_event(item_id: str, audio_end_ms: int) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_stopped",
        "event_id": new_id("event"),
        "item_id": item_id,
        "audio_end_ms": audio_end_ms,
    }


def committed_events(shape: Shape, item_id: str, previous_item_id: str | None) -> list[dict[str, Any]]:
    """A commit's events: the buffer committed, then the item it became (GA ``added``, beta ``created``)."""
    return [
        {
            "type": "input_audio_buffer.committed",
            "event_id": new_id("event"),
            "item_id": item_id,
            "previous_item_id": previous_item_id,
        },
        {
            "type": "conversation.item.added" if shape == "ga" else "conversation.item.created",
            "event_id": new_id("event"),
            "previous_item_id": previous_item_id,
            "item": item_json(item_id, "in_progress", None),
        },
    ]


def cleared_event() -> dict[str, Any]:
    return {"type": "input_audio_buffer.cleared", "event_id": new_id("event")}


def delta_event(item_id: str, delta: str, audio_end_ms: int) -> dict[str, Any]:
    return {
        "type": "conversation.item.input_audio_transcription.delta",
        "event_id": new_id("event"),
        "item_id": item_id,
        "content_index": 0,
        "delta": delta,
        "logprobs": None,
        "audio_end_ms": audio_end_ms,  # voxlane: the audio this text was read from ends here
    }


def completed_event(
    item_id: str,
    transcript: str,
    logprobs: list[dict[str, object]] | None,
    seconds: float,
    audio_start_ms: int,
    audio_end_ms: int,
) -> dict[str, Any]:
    return {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": new_id("event"),
        "item_id": item_id,
        "content_index": 0,
        "transcript": transcript,
        "logprobs": logprobs,
        "usage": {"type": "duration", "seconds": seconds},
        "audio_start_ms": audio_start_ms,  # voxlane: where the turn's audio lies in the session
        "audio_end_ms": audio_end_ms,
    }


def item_done_event(item_id: str, previous_item_id: str | None, transcript: str) -> dict[str, Any]:
    return {
        "type": "conversation.item.done",
        "event_id": new_id("event"),
        "previous_item_id": previous_item_id,
        "item": item_json(item_id, "completed", transcript),
    }


def failed_event(item_id: str, error: VoxlaneError) -> dict[str, Any]:
    return {
        "type": "conversation.item.input_audio_transcription.failed",
        "event_id": new_id("event"),
        "item_id": item_id,
        "content_index": 0,
        "error": {"type": error.error_type, "code": error.code, "message": error.message, "param": error.param},
    }
