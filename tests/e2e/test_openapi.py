"""The API fuzzed from its own schema: schemathesis generates requests for every operation in
/openapi.json and sends them to a real server on 127.0.0.1: the schema's examples, its boundary and enum
values and their violations (the coverage phase, deterministic), then MAX_EXAMPLES random requests per
operation, valid ones and ones that break the schema. Checks: no 5xx (bad input gets a clear 4xx, and input
that breaks the schema is refused), no hang (a request timeout), and each response's status, content type
and body, server-sent events included, as the schema declares them. Random bytes are never audio, so a valid
transcription request carries a real clip and its fields decide the answer's shape. About 1.5 minutes on
2 cores, most of it the real transcriptions."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, Phase, settings
from schemathesis import Case, GenerationMode, checks
from schemathesis.openapi import from_dict

from tests.conftest import Clip, ServerProcess
from voxlane.config import ServerConfig
from voxlane.server.app import build_app

MAX_EXAMPLES = 20
REQUEST_TIMEOUT_S = 60.0
"""A request that takes longer hangs: a bad upload is refused in milliseconds, a fuzzed speech input of a
few hundred characters is spoken in seconds."""

SCHEMA = build_app(ServerConfig()).openapi()
schema = from_dict(SCHEMA)
schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]


def test_served_schema_is_the_fuzzed_one(server: ServerProcess) -> None:
    served = httpx.get(server.base_url + "/openapi.json", timeout=10).json()
    assert served == SCHEMA
    schema.validate()  # against OpenAPI 3.1's own schema
    body = served["paths"]["/v1/audio/transcriptions"]["post"]["requestBody"]["content"]["multipart/form-data"]
    fields = body["schema"]["properties"]
    assert fields["file"]["format"] == "binary"
    assert fields["response_format"]["enum"] == ["json", "text", "verbose_json", "srt", "vtt", "diarized_json", "rttm"]
    assert fields["timestamp_granularities[]"]["items"]["enum"] == ["segment", "word"]
    assert body["schema"]["required"] == ["file", "model"]
    for path, operations in served["paths"].items():
        for method, operation in operations.items():
            assert "422" not in operation["responses"], f"{method} {path}: voxlane answers 400, never 422"


def test_a_form_that_does_not_parse_says_what_to_send(server: ServerProcess) -> None:
    two_files = [("file", ("a.wav", b"RIFF")), ("file", ("b.wav", b"RIFF"))]
    response = httpx.post(server.base_url + "/v1/audio/transcriptions", files=two_files, data={"model": "whisper-1"})
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "Too many files" in message and "send multipart/form-data with a 'file' part" in message


@pytest.fixture(scope="module")
def speech_clip(dev_set: list[Clip]) -> bytes:
    return min(dev_set, key=lambda clip: clip.duration_s).path.read_bytes()


@schema.exclude(method="POST", path="/v1/models/{model_id}").parametrize()  # a pull: a download, not fuzz
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,  # a request's own timeout bounds it; speech takes seconds, not milliseconds
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_fuzzed_from_its_schema(case: Case, server: ServerProcess, speech_clip: bytes) -> None:
    positive = case.meta is not None and case.meta.generation.mode == GenerationMode.POSITIVE
    if positive and case.operation.path == "/v1/audio/transcriptions" and isinstance(case.body, dict):
        case.body["file"] = speech_clip
    case.call_and_validate(base_url=server.base_url, checks=CHECKS, timeout=REQUEST_TIMEOUT_S)
