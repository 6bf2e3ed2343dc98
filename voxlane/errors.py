"""The exception tree and its one mapping to HTTP and OpenAI's error JSON.

::

    VoxlaneError                      500 server_error
    ├── InvalidRequest                400 invalid_request_error   (a bad field; says what to send)
    │   └── UnsupportedAudio          400 invalid_request_error   (the file is not audio we can decode)
    ├── Unauthorized                  401 invalid_request_error   (no API key, or a wrong one)
    ├── ModelNotFound                 404 invalid_request_error
    ├── ModelInUse                    409 invalid_request_error   (a model that cannot be unloaded now)
    ├── PayloadTooLarge               413 invalid_request_error   (upload size, audio duration)
    ├── QueueFull                     429 rate_limit_error        (a queue limit; Retry-After says when)
    ├── EngineUnavailable             503 server_error            (engine dead, restarting, overloaded or timed
    │                                                              out; the server draining)
    └── ClientGone                    499 (nobody reads it)       (the client disconnected; not an error of ours)

Raise these anywhere; ``server/app.py`` turns them into responses in exactly one handler. An error with
``retry_after_s`` also sends a ``Retry-After`` header (whole seconds), for the 503s that will pass. The one
exception is ``Unauthorized``, answered by the key check (``server/auth.py``) before any route, and
any body, is read; it answers with the same ``to_json()``.
"""

from __future__ import annotations

import math
from typing import Any


class VoxlaneError(Exception):
    status_code = 500
    error_type = "server_error"

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, retry_after_s: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.retry_after_s = retry_after_s
        """Seconds after which the same request should succeed, when known (sent as ``Retry-After``)."""

    def to_json(self) -> dict[str, Any]:
        return error_json(self.message, self.error_type, self.param, self.code)

    def headers(self) -> dict[str, str] | None:
        return None if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}


class InvalidRequest(VoxlaneError):
    status_code = 400
    error_type = "invalid_request_error"


class UnsupportedAudio(InvalidRequest):
    def __init__(self, message: str, *, param: str | None = "file", code: str | None = "invalid_audio") -> None:
        super().__init__(message, param=param, code=code)


class Unauthorized(VoxlaneError):
    """As OpenAI answers a missing or wrong key, so that its client raises ``openai.AuthenticationError``."""

    status_code = 401
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = "invalid_api_key") -> None:
        super().__init__(message, param=param, code=code)


class ModelNotFound(VoxlaneError):
    status_code = 404
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = "model", code: str | None = "model_not_found") -> None:
        super().__init__(message, param=param, code=code)


class ModelInUse(VoxlaneError):
    """An unload refused: the default model, or a model with work in flight (the message says which)."""

    status_code = 409
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = "model", code: str | None = "model_in_use") -> None:
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
        super().__init__(message, code=code, retry_after_s=max(1, math.ceil(retry_after_s)))


class EngineUnavailable(VoxlaneError):
    status_code = 503
    error_type = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = "engine_unavailable",
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code, retry_after_s=retry_after_s)


class ClientGone(VoxlaneError):
    """The client disconnected before its answer: its work was aborted. Answered quietly (nginx's 499);
    logging a traceback per disconnect would itself stall the event loop."""

    status_code = 499
    error_type = "client_closed_request"

    def __init__(self, message: str = "the client closed the connection", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


def error_json(message: str, error_type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}
