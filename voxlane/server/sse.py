"""Server-sent events, for every route that streams them (transcriptions with ``stream=true``, speech with
``stream_format=sse``): each event is one ``data:`` line of JSON.

A failure after the response has started cannot change its status, so it ends the stream with one event in
OpenAI's error shape, the same for every route, ``{"type": "error", "error": {"message", "type", "param",
"code"}}``; it is logged and counted in ``voxlane_stream_errors_total``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi.responses import StreamingResponse

from voxlane.errors import VoxlaneError
from voxlane.server.metrics import Metrics

log = logging.getLogger(__name__)


def event_stream(payloads: AsyncGenerator[dict[str, Any], None], metrics: Metrics, name: str) -> StreamingResponse:
    """A response sending each of ``payloads`` as an event; ``name`` says which stream in the log."""
    return StreamingResponse(_events(payloads, metrics, name), media_type="text/event-stream")


async def _events(payloads: AsyncGenerator[dict[str, Any], None], metrics: Metrics, name: str) -> AsyncIterator[str]:
    try:
        async with aclosing(payloads):
            async for payload in payloads:
                yield _event(payload)
    except VoxlaneError as exc:
        metrics.stream_errors.inc()
        log.warning("%s ended early: %s", name, exc.message)
        yield _event({"type": "error", **exc.to_json()})


def _event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"
