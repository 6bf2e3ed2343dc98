"""The form of /v1/audio/transcriptions and /v1/audio/translations, read from its multipart body and checked
against this server (its models, its upload limit, its speaker encoder), so that the route starts from a
request it can serve. The rules between the form's own fields are TranscriptionRequest's (voxlane/protocol.py);
every failure is a 400 (404 for an unknown model, 413 for an upload too large) in OpenAI's error JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from voxlane.audio.vad import VadOptions
from voxlane.errors import InvalidRequest
from voxlane.models import WhisperModel
from voxlane.protocol import (
    CHUNKING_HINT,
    FORM_RULE,
    MAX_KNOWN_SPEAKERS,
    RESPONSE_FORMATS,
    SPEAKER_COUNT_FIELDS,
    ServerVad,
    Task,
    TranscriptionRequest,
    multipart_body,
)
from voxlane.server import diarized
from voxlane.server.forms import UploadLimit, file_part, read_form, text_fields
from voxlane.server.state import AppState

LIST_FIELDS = (
    "timestamp_granularities",
    "include",
    "keywords",
    "languages",
    "known_speaker_names",
    "known_speaker_references",
)
"""Fields that hold a list: the openai client sends each item as a part named 'name[]'."""

OPENAPI_BODY = multipart_body(
    {"file": "The audio: wav, flac, mp3, ogg, webm, m4a or anything else FFmpeg reads."},
    TranscriptionRequest,
    rename={name: name + "[]" for name in LIST_FIELDS},
)
"""What /openapi.json and /docs show of the form, which is read by hand: for OpenAI's error messages and the
openai client's spellings of lists and of chunking_strategy."""

_REFERENCE_PART_BYTES = 1024 * 1024
"""Starlette's limit on one text part of a form: a known speaker's reference clip (a data URL) is one; 10 s of
16 kHz wav in base64 takes 0.43 MB of it."""


@dataclass(frozen=True)
class TranscriptionForm:
    """A transcription or translation request that passed every check that needs no audio."""

    upload: UploadFile
    params: TranscriptionRequest
    model: WhisperModel
    """The Whisper model that ``params.model`` names, loaded or not."""
    vad: VadOptions | None
    """Voice activity detection from ``chunking_strategy`` (or the server's default), None for fixed windows."""

    @classmethod
    async def read(cls, request: Request, state: AppState, task: Task) -> TranscriptionForm:
        limit = UploadLimit(
            state.config.max_upload_mb,
            "--max-upload-mb",
            advice=": send a compressed format such as mp3 or opus, or split the audio",
        )
        upload, params = await _parse(request, state, limit)
        model = await state.models.whisper(params.model, state.executors)  # 404 before any work for an unknown one
        _check_model(task, params, model)
        diarized.check(state, task, params)
        limit.check(upload.size or 0)
        vad = _vad_options(params.chunking_strategy or state.config.chunking_strategy)
        return cls(upload, params, model, vad)


async def _parse(request: Request, state: AppState, limit: UploadLimit) -> tuple[UploadFile, TranscriptionRequest]:
    form = await read_form(
        request,
        limit,
        other_bytes=64 * 1024 + MAX_KNOWN_SPEAKERS * _REFERENCE_PART_BYTES,
        max_files=1,
        max_fields=64,
        parts="a 'file' part",
    )
    upload = file_part(form, "file", "missing 'file': send the audio as a multipart file part named 'file'")
    fields: dict[str, Any] = text_fields(form)
    for name in LIST_FIELDS:  # the openai client sends a list as repeated 'name[]' parts
        values = form.getlist(name + "[]") + form.getlist(name)
        fields[name] = [v for v in values if isinstance(v, str)]
        fields.pop(name + "[]", None)
    try:
        return upload, TranscriptionRequest.model_validate(fields)
    except ValidationError as exc:
        raise _invalid(exc, state.config.model_name, state.config.diarize_max_speakers) from None


def _invalid(exc: ValidationError, model_name: str, max_speakers: int) -> InvalidRequest:
    """The request's first error, as OpenAI's error JSON says it, with what to send instead."""
    err = exc.errors()[0]
    if err["type"] == FORM_RULE:
        return InvalidRequest(err["msg"], param=err["ctx"]["param"])
    param = ".".join(str(p) for p in err["loc"]) or None
    if param == "model" and err["type"] == "missing":
        return InvalidRequest(f"missing 'model': send model='{model_name}'", param="model")
    message = err["msg"].removeprefix("Value error, ")
    if param == "response_format":
        message = f"response_format must be one of {', '.join(RESPONSE_FORMATS)}"
    if param in SPEAKER_COUNT_FIELDS:
        return InvalidRequest(
            f"invalid '{param}': {message}; send a whole number of speakers from 1 to {max_speakers} "
            "(--diarize-max-speakers)",
            param=param,
        )
    if param and param.startswith("chunking_strategy"):
        field = param.split(".")[-1]
        detail = f"{field}: {message}; " if field in ServerVad.model_fields and field != "type" else ""
        return InvalidRequest(f"invalid 'chunking_strategy': {detail}{CHUNKING_HINT}", param="chunking_strategy")
    return InvalidRequest(f"invalid '{param}': {message}", param=param)


def _check_model(task: Task, params: TranscriptionRequest, model: WhisperModel) -> None:
    """What an English-only model cannot do: translate, or read another language."""
    if task == "translate" and not model.multilingual:
        raise InvalidRequest(
            f"the model '{model.name}' is English-only and cannot translate; send a multilingual Whisper model "
            "(whisper-base: pip install 'voxlane[multilingual]'; docs/models.md) or use /v1/audio/transcriptions",
            param="model",
            code="translation_unsupported",
        )
    if params.language not in (None, "en") and not model.multilingual:
        raise InvalidRequest(
            f"the model '{model.name}' is English-only; send language='en' or leave language out, or send a "
            "multilingual model (whisper-base)",
            param="language",
        )


def _vad_options(strategy: str | ServerVad) -> VadOptions | None:
    if isinstance(strategy, ServerVad):
        return VadOptions(strategy.threshold, strategy.prefix_padding_ms, strategy.silence_duration_ms)
    return VadOptions() if strategy == "auto" else None
