"""Graceful drain: after SIGTERM or Ctrl-C the server stops admitting work but lets what is in flight finish.

``Drain`` holds the state (when the drain began, the requests in flight); ``DrainGate``, a pure ASGI
middleware, keeps the count and answers new requests 503 once the drain has begun; the CLI's uvicorn server
begins it on the first signal and starts uvicorn's own shutdown once ``Drain.over`` (see ``voxlane/cli.py``).
The listening socket stays open meanwhile, so a client sees a 503 with ``Retry-After``, not a refused
connection. ``/health`` and ``/metrics`` still answer (``/health`` with 503 and ``"status": "draining"``).
When the drain times out with requests in flight, ``Drain.expire`` fails those waiting on the engine with
the same 503, so that they answer it at once rather than uvicorn's bare 500 when its shutdown cancels them.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from voxlane.errors import EngineUnavailable

DRAIN_RETRY_AFTER_S = 5
"""Retry-After of a request turned away during a drain: this server is going away, and a restarted one (or
another replica behind the same address) takes a few seconds to load its models."""
_ALWAYS_ANSWERED = ("/health", "/metrics")


class Drain:
    """Owned by the event loop's thread; ``begin`` is also called from the signal handler, which runs there."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.began_at: float | None = None
        """When the drain began (time.monotonic()); None while serving."""
        self.in_flight = 0
        """HTTP requests being answered, apart from /health and /metrics."""
        self.on_expiry: Callable[[EngineUnavailable], None] | None = None
        """Called by ``expire`` with the drain's 503 (the lifespan sets it: the engine client fails its
        streams and stops taking work)."""

    @property
    def draining(self) -> bool:
        return self.began_at is not None

    def begin(self, now: float) -> None:
        if self.began_at is None:
            self.began_at = now

    def over(self, now: float) -> bool:
        """True once every request in flight has finished, or the drain timeout has passed."""
        assert self.began_at is not None
        return self.in_flight == 0 or now - self.began_at >= self.timeout_s

    def expire(self) -> None:
        """The drain timed out with requests in flight: have them answer the drain's 503 now."""
        if self.on_expiry is not None:
            self.on_expiry(self.refusal())

    def refusal(self) -> EngineUnavailable:
        return EngineUnavailable(
            "the server is shutting down and takes no new requests; retry shortly (another instance, or this "
            "one once restarted)",
            code="shutting_down",
            retry_after_s=DRAIN_RETRY_AFTER_S,
        )


class DrainGate:
    """Counts the requests in flight; once draining, answers new ones 503 with Retry-After."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _ALWAYS_ANSWERED:
            await self.app(scope, receive, send)
            return
        if self.drain.draining:
            error = self.drain.refusal()
            await JSONResponse(error.to_json(), status_code=error.status_code, headers=error.headers())(
                scope, receive, send
            )
            return
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1
