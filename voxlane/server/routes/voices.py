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
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException

from voxlane.errors import InvalidRequest, PayloadTooLarge
from voxlane.messages import VoiceProbed
from voxlane.protocol import VoiceCard, VoiceList
from voxlane.server.state import AppState, get_state
from voxlane.voices import OPENAI_VOICES, Voice, VoiceRegistry, remove_dir

router = APIRouter()

_MiB = 1024 * 1024
_MAX_CONFIG_BYTES = 4 * _MiB


def _registry(state: AppState) -> VoiceRegistry:
    assert state.voices is not None
    return state.voices


@router.get("/v1/audio/voices")
async def list_voices(request: Request) -> Response:
    voices = _registry(get_state(request)).names()
    cards = [VoiceCard(id=v.name, builtin=v.builtin, aliases=list(OPENAI_VOICES) if v.builtin else [])
             for v in voices]
    return JSONResponse(VoiceList(data=cards).model_dump())


@router.post("/v1/audio/voices")
async def upload_voice(request: Request) -> Response:
    state = get_state(request)
    registry = _registry(state)
    limit = int(state.config.max_voice_upload_mb * _MiB)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + _MAX_CONFIG_BYTES:
        _too_large(int(declared), state)
    try:
        form = await request.form(max_files=2, max_fields=8)
    except (MultiPartException, AssertionError, ValueError) as exc:
        raise InvalidRequest(f"could not parse the form ({exc}); send multipart/form-data with parts 'name', "
                             "'model' (.onnx) and 'config' (.onnx.json)") from None
    name = form.get("name")
    model, config = form.get("model"), form.get("config")
    if not isinstance(name, str) or not name:
        raise InvalidRequest("missing 'name': send the voice's name as a form field", param="name")
    if not isinstance(model, UploadFile) or not isinstance(config, UploadFile):
        raise InvalidRequest("send the voice as two file parts: 'model' (the .onnx) and 'config' (its .onnx.json)",
                             param="model" if not isinstance(model, UploadFile) else "config")
    registry.check_name(name)
    if model.size is not None and model.size > limit:
        _too_large(model.size, state)
    if config.size is not None and config.size > _MAX_CONFIG_BYTES:
        raise PayloadTooLarge("the voice config is over 4 MiB; a Piper .onnx.json is a few KiB", param="config")

    async def probe(voice: Voice) -> VoiceProbed:
        return await state.engine.probe_voice(voice.model_path, voice.config_path, state.config.request_timeout_s)

    files = partial(state.executors.run, "files")
    voice = await registry.add(name, model.file, config.file, probe=probe, files=files)
    return JSONResponse(VoiceCard(id=voice.name, builtin=False).model_dump(), status_code=201)


@router.delete("/v1/audio/voices/{name}")
async def delete_voice(name: str, request: Request) -> Response:
    state = get_state(request)
    registry = _registry(state)
    if not registry.is_uploaded(name):
        raise InvalidRequest(f"there is no uploaded voice '{name}' to delete (built-in voices cannot be deleted)",
                             param="name", code="voice_not_found")
    stale, snapshot, generation = registry.remove(name)
    await state.executors.run("files", registry.write_index, snapshot, generation)
    await state.executors.run("files", remove_dir, stale)
    return JSONResponse({"id": name, "object": "voice", "deleted": True})


def _too_large(size: int, state: AppState) -> None:
    raise PayloadTooLarge(f"the voice upload is {size / _MiB:.1f} MiB, over the limit of "
                          f"{state.config.max_voice_upload_mb:g} MiB (--max-voice-upload-mb)", param="model",
                          code="file_too_large")
