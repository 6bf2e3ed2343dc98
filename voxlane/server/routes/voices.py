"""GET/POST /v1/audio/voices and DELETE /v1/audio/voices/{name}: the voices the server speaks with.

An upload is multipart: ``name``, ``model`` (the ``.onnx``) and ``config`` (its ``.onnx.json``). It is
copied, then loaded and made to speak a probe by the engine process before it is accepted (the reason is
returned when it fails; a 503 when the engine cannot answer), then stored in the data directory, so it
survives restarts. See voxlane/voices.py for what deleting or replacing a voice does to streams using it.
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from voxlane.errors import InvalidRequest, PayloadTooLarge
from voxlane.messages import VoiceProbed
from voxlane.protocol import VoiceCard, VoiceDeleted, VoiceList, VoiceUpload, error_responses, multipart_body
from voxlane.server.forms import MiB, UploadLimit, file_part, read_form, text_field
from voxlane.server.state import AppState, get_state
from voxlane.voices import OPENAI_VOICES, Voice, VoiceRegistry, remove_dir

router = APIRouter()

_MAX_CONFIG_BYTES = 4 * MiB
_FILE_PARTS = "send the voice as two file parts: 'model' (the .onnx) and 'config' (its .onnx.json)"
# The form is read by hand (for its size limits and messages); this is what /openapi.json and /docs show of it.
_FORM = multipart_body(
    {
        "model": "The Piper voice model, a .onnx file (at most --max-voice-upload-mb).",
        "config": "Its config, the .onnx.json beside it (at most 4 MiB).",
    },
    VoiceUpload,
)


def _registry(state: AppState) -> VoiceRegistry:
    assert state.voices is not None
    return state.voices


@router.get("/v1/audio/voices", response_model=VoiceList)
async def list_voices(request: Request) -> Response:
    voices = _registry(get_state(request)).names()
    cards = [VoiceCard(id=v.name, builtin=v.builtin, aliases=list(OPENAI_VOICES) if v.builtin else []) for v in voices]
    return JSONResponse(VoiceList(data=cards).model_dump())


@router.post(
    "/v1/audio/voices",
    status_code=201,
    response_model=VoiceCard,
    response_description="The voice loaded, spoke a probe sentence, and is stored.",
    responses=error_responses(400, 413, 503),
    openapi_extra=_FORM,
)
async def upload_voice(request: Request) -> Response:
    state = get_state(request)
    registry = _registry(state)
    limit = UploadLimit(
        state.config.max_voice_upload_mb, "--max-voice-upload-mb", what="the voice upload", param="model"
    )
    form = await read_form(
        request,
        limit,
        other_bytes=_MAX_CONFIG_BYTES,
        max_files=2,
        max_fields=8,
        parts="parts 'name', 'model' (.onnx) and 'config' (.onnx.json)",
    )
    name = text_field(form, "name", "missing 'name': send the voice's name as a form field")
    model = file_part(form, "model", _FILE_PARTS)
    config = file_part(form, "config", _FILE_PARTS)
    registry.check_name(name)
    if model.size is not None:
        limit.check(model.size)
    if config.size is not None and config.size > _MAX_CONFIG_BYTES:
        raise PayloadTooLarge("the voice config is over 4 MiB; a Piper .onnx.json is a few KiB", param="config")

    async def probe(voice: Voice) -> VoiceProbed:
        return await state.engine.probe_voice(voice.model_path, voice.config_path, state.config.request_timeout_s)

    files = partial(state.executors.run, "files")
    voice = await registry.add(name, model.file, config.file, probe=probe, files=files)
    return JSONResponse(VoiceCard(id=voice.name, builtin=False).model_dump(), status_code=201)


@router.delete("/v1/audio/voices/{name}", response_model=VoiceDeleted, responses=error_responses(400))
async def delete_voice(name: str, request: Request) -> Response:
    state = get_state(request)
    registry = _registry(state)
    if not registry.is_uploaded(name):
        raise InvalidRequest(
            f"there is no uploaded voice '{name}' to delete (built-in voices cannot be deleted)",
            param="name",
            code="voice_not_found",
        )
    stale, snapshot, generation = registry.remove(name)
    await state.executors.run("files", registry.write_index, snapshot, generation)
    await state.executors.run("files", remove_dir, stale)
    return JSONResponse(VoiceDeleted(id=name).model_dump())
