"""The request fields of the installed openai SDK, and docs/openai-compatibility.md's table of them: what a
test compares to keep voxlane honest about what it implements (tests/e2e/test_openai_compat.py)."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "openai-compatibility.md"


def _typed_dict_keys(td: type) -> set[str]:
    return set(td.__required_keys__ | td.__optional_keys__)  # type: ignore[attr-defined]


def _models(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models inside an annotation (through Optional, Union, List, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, typing.Annotated):
        return [m for arg in typing.get_args(annotation) for m in _models(arg)]
    return []


def _model_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    fields = set()
    for name, info in model.model_fields.items():
        path = prefix + name
        nested = _models(info.annotation)
        if nested:
            for m in nested:
                fields |= _model_fields(m, path + ".")
        else:
            fields.add(path)
    return fields


def sdk_fields() -> set[str]:
    """'request field' for every field the SDK can send: transcriptions, translations, speech, and a realtime
    transcription session's configuration (dotted paths)."""
    from openai.types.audio import speech_create_params, transcription_create_params, translation_create_params
    from openai.types.realtime import realtime_transcription_session_create_request as realtime

    fields = {
        f"transcriptions {k}" for k in _typed_dict_keys(transcription_create_params.TranscriptionCreateParamsBase)
    }
    fields.add("transcriptions stream")
    fields |= {f"translations {k}" for k in _typed_dict_keys(translation_create_params.TranslationCreateParams)}
    fields |= {f"speech {k}" for k in _typed_dict_keys(speech_create_params.SpeechCreateParams)}
    fields |= {f"realtime {k}" for k in _model_fields(realtime.RealtimeTranscriptionSessionCreateRequest)}
    return fields


def table_rows() -> dict[str, tuple[str, str]]:
    """'request field' -> (status, why) from the table's rows ``| request | `field` | status | why |``."""
    rows = {}
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("transcriptions", "translations", "speech", "realtime"):
            field = re.sub(r"`", "", cells[1])
            rows[f"{cells[0]} {field}"] = (cells[2], cells[3])
    return rows
