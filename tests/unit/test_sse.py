"""Server-sent events: payloads go out as ``data:`` lines, and a failure mid-stream ends it with one event in
OpenAI's error shape, the same for transcription and speech streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

from voxlane.errors import EngineUnavailable, InvalidRequest, VoxlaneError
from voxlane.server.metrics import Metrics
from voxlane.server.sse import event_stream


async def _payloads(error: VoxlaneError | None) -> AsyncGenerator[dict[str, Any], None]:
    yield {"type": "transcript.text.delta", "delta": "hello"}
    if error is not None:
        raise error
    yield {"type": "transcript.text.done", "text": "hello"}


def _events(error: VoxlaneError | None, metrics: Metrics) -> list[dict[str, Any]]:
    async def read() -> list[str]:
        response = event_stream(_payloads(error), metrics, "test stream")
        assert response.media_type == "text/event-stream"
        return [chunk async for chunk in response.body_iterator]  # type: ignore[misc]

    chunks = asyncio.run(read())
    assert all(c.startswith("data: ") and c.endswith("\n\n") for c in chunks)
    return [json.loads(c.removeprefix("data: ")) for c in chunks]


def test_each_payload_is_one_event() -> None:
    metrics = Metrics()
    events = _events(None, metrics)
    assert [e["type"] for e in events] == ["transcript.text.delta", "transcript.text.done"]
    assert metrics.registry.get_sample_value("voxlane_stream_errors_total") == 0


def test_a_failure_ends_the_stream_with_an_openai_error_event() -> None:
    metrics = Metrics()
    events = _events(EngineUnavailable("the engine stopped"), metrics)
    assert events[-1] == {
        "type": "error",
        "error": {"message": "the engine stopped", "type": "server_error", "param": None, "code": "engine_unavailable"},
    }
    assert [e["type"] for e in events] == ["transcript.text.delta", "error"]
    assert metrics.registry.get_sample_value("voxlane_stream_errors_total") == 1


def test_a_client_error_keeps_its_param() -> None:
    events = _events(InvalidRequest("bad voice", param="voice"), Metrics())
    assert events[-1]["error"]["type"] == "invalid_request_error" and events[-1]["error"]["param"] == "voice"
