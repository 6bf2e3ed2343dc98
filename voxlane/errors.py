"""The exception tree and its one mapping to HTTP and OpenAI's error JSON.

::

    VoxlaneError                      500 server_error
    ├── InvalidRequest                400 invalid_request_error   (a bad field; says what to send)
    │   └── UnsupportedAudio          400 invalid_request_error   (the file is not audio we can decode)
    ├── ModelNotFound                 404 invalid_request_error
    ├── PayloadTooLarge               413 invalid_request_error   (upload size, audio duration)
    ├── QueueFull                     429 rate_limit_error        (a queue limit; Retry-After says when)
    ├── EngineUnavailable             503 server_error            (engine dead, overloaded or timed out)
    └── ClientGone                    499 (nobody reads it)       (the client disconnected; not an error of ours)

Raise these anywhere; ``server/app.py`` turns them into responses in exactly one handler.
"""

from __future__ import annotations

import math
from typing import Any


class VoxlaneError(Exception):
    status_code = 500
    error_type = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers
        """HTTP headers the response carries (``Retry-After``, say)."""

    def to_json(self) -> dict[str, Any]:
        return error_json(self.message, self.error_type, self.param, self.code)


class InvalidRequest(VoxlaneError):
    status_code = 400
    error_type = "invalid_request_error"


class UnsupportedAudio(InvalidRequest):
    def __init__(self, message: str, *, param: str | None = "file", code: str | None = "invalid_audio") -> None:
        super().__init__(message, param=param, code=code)


class ModelNotFound(VoxlaneError):
    status_code = 404
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = "model", code: str | None = "model_not_found") -> None:
        super().__init__(message, param=param, code=code)


class PayloadTooLarge(VoxlaneError):
    status_code = 413
    error_type = "invalid_request_error"


class QueueFull(VoxlaneError):
    """A queue is at its limit (queued audio seconds, speech characters, requests at once): come back in
    ``retry_after_s`` seconds, which the response's ``Retry-After`` header says (the openai client waits that
    long before its retry)."""

    status_code = 429
    error_type = "rate_limit_error"

    def __init__(self, message: str, *, retry_after_s: float, code: str | None = "queue_full") -> None:
        super().__init__(message, code=code, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})
        self.retry_after_s = retry_after_s


class EngineUnavailable(VoxlaneError):
    status_code = 503
    error_type = "server_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = "engine_unavailable") -> None:
        super().__init__(message, param=param, code=code)


class ClientGone(VoxlaneError):
    """The client disconnected before its answer: its work was aborted. Answered quietly (nginx's 499);
    logging a traceback per disconnect would itself stall the event loop."""

    status_code = 499
    error_type = "client_closed_request"

    def __init__(self, message: str = "the client closed the connection", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


def error_json(message: str, error_type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}
