"""API keys: a pure ASGI middleware in front of every route.

With keys configured (``--api-key``, ``VOXLANE_API_KEY``, ``--api-keys-file``), a request to ``/v1/*`` or
``/api/*``, and to ``/metrics`` with ``--metrics-need-key``, must carry ``Authorization: Bearer KEY`` with one
of them (a WebSocket may instead offer the subprotocol ``openai-insecure-api-key.KEY``, OpenAI's form for
browsers). Anything else is answered 401 at once, before a route runs or its body is read, with the error JSON
OpenAI sends (``invalid_request_error`` / ``invalid_api_key``), so the stock openai client raises
``openai.AuthenticationError``. ``/health`` never needs a key: load balancers and supervisors probe it.

The check is constant time: the SHA-256 of the sent token is compared with the SHA-256 of every key by
``hmac.compare_digest``, against all keys each time, so the time taken tells neither how much of a key
matched nor which key did. The keys come from the config, read once at start; nothing here reads a file
or logs a key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from voxlane.errors import Unauthorized

_SHOWN_TAIL = 4
"""Characters of a wrong key the 401 echoes back (OpenAI's "sk-ab***wxyz"); shorter keys are not echoed."""


class RequireApiKey:
    """Answers 401 to a request for a protected path without one of ``keys``; passes everything else on."""

    def __init__(self, app: ASGIApp, keys: Sequence[str], *, protect_metrics: bool = False) -> None:
        if not keys:
            raise ValueError("RequireApiKey needs at least one key; leave the middleware out to serve without keys")
        self.app = app
        self._digests = tuple(_digest(key.encode()) for key in keys)
        self._protect_metrics = protect_metrics

    def needs_key(self, path: str) -> bool:
        api = path in ("/v1", "/api") or path.startswith(("/v1/", "/api/"))  # /api: speaches' model routes
        return api or (self._protect_metrics and path == "/metrics")

    def accepts(self, token: bytes) -> bool:
        sent = _digest(token)
        matched = False
        for digest in self._digests:  # no early exit: every key costs the same, matched or not
            matched |= hmac.compare_digest(sent, digest)
        return matched

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self.needs_key(scope["path"]):
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope["headers"])
        if token is None and scope["type"] == "websocket":
            token = subprotocol_token(scope["headers"])
        if token is not None and self.accepts(token):
            await self.app(scope, receive, send)
            return
        error = refusal(token)
        response = JSONResponse(error.to_json(), status_code=error.status_code, headers={"WWW-Authenticate": "Bearer"})
        if scope["type"] == "websocket":
            if "websocket.http.response" in scope.get("extensions", {}):
                # Refuse the handshake with the same 401 and JSON body as HTTP (the client can read why);
                # Starlette sends it as the ASGI denial response for a websocket scope.
                await response(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})  # policy violation; before accept: HTTP 403
            return
        await response(scope, receive, send)


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token of the first ``Authorization: Bearer TOKEN`` header (scheme in any case), else None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            token = token.strip()
            return token if scheme.lower() == b"bearer" and token else None
    return None


BROWSER_KEY_PREFIX = b"openai-insecure-api-key."
"""OpenAI's form of the key for browsers, which cannot set headers on a WebSocket: the subprotocol
``openai-insecure-api-key.KEY`` offered next to ``realtime`` in Sec-WebSocket-Protocol."""


def subprotocol_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The key of an ``openai-insecure-api-key.KEY`` subprotocol, else None."""
    for name, value in headers:
        if name.lower() == b"sec-websocket-protocol":
            for protocol in value.split(b","):
                protocol = protocol.strip()
                if protocol.startswith(BROWSER_KEY_PREFIX) and len(protocol) > len(BROWSER_KEY_PREFIX):
                    return protocol[len(BROWSER_KEY_PREFIX) :]
    return None


def refusal(token: bytes | None) -> Unauthorized:
    """The 401 for a request that sent ``token`` (None: no usable Authorization header)."""
    if token is None:
        return Unauthorized(
            "You didn't provide an API key. Send it in an Authorization header using Bearer auth "
            "(Authorization: Bearer YOUR_KEY); the openai client sends its api_key= that way."
        )
    return Unauthorized(
        f"Incorrect API key provided: {masked(token)}. Send one of the keys this server was started with "
        "(--api-key, VOXLANE_API_KEY or --api-keys-file)."
    )


def masked(token: bytes) -> str:
    """A wrong key as the 401 shows it: its first 3 and last 4 characters, or only stars when it is short."""
    text = token.decode("latin-1")
    if len(text) < 3 * _SHOWN_TAIL:
        return "***"
    return f"{text[:3]}***{text[-_SHOWN_TAIL:]}"


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()
