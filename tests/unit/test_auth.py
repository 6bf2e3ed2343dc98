"""The API key middleware on a tiny app: which paths need a key, what a refusal looks like, and that the
body of a refused request is never read."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from voxlane.server.auth import RequireApiKey, bearer_token, masked

KEYS = ("first-key-0123456789", "second-key-abcdefghij")
bodies_read: list[bytes] = []


async def ok(request: Request) -> PlainTextResponse:
    bodies_read.append(await request.body())
    return PlainTextResponse("ok")


def client(protect_metrics: bool = False) -> TestClient:
    routes = [Route(p, ok, methods=["GET", "POST"]) for p in ("/health", "/metrics", "/v1/models", "/docs")]
    return TestClient(RequireApiKey(Starlette(routes=routes), KEYS, protect_metrics=protect_metrics))


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("key", KEYS)
def test_every_configured_key_is_accepted(key: str) -> None:
    r = client().get("/v1/models", headers=bearer(key))
    assert (r.status_code, r.text) == (200, "ok")


def test_the_scheme_is_case_insensitive() -> None:
    assert client().get("/v1/models", headers={"Authorization": f"bearer {KEYS[0]}"}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("first-key-012345678"),  # a prefix of a key
        bearer(KEYS[0] + "x"),
        bearer(KEYS[0].upper()),
        {"Authorization": KEYS[0]},  # no scheme
        {"Authorization": f"Basic {KEYS[0]}"},
        {"Authorization": "Bearer "},
    ],
)
def test_a_missing_or_wrong_key_gets_openais_401(headers: dict[str, str]) -> None:
    bodies_read.clear()
    r = client().post("/v1/models", headers=headers, content=b"x" * 1000)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    error: dict[str, Any] = r.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_api_key", None)
    assert "Authorization: Bearer" in error["message"] or "Incorrect API key provided" in error["message"]
    assert bodies_read == []  # refused before the route, and before the upload is read


def test_a_wrong_key_is_echoed_masked_as_openai_does() -> None:
    error = client().get("/v1/models", headers=bearer("sk-wrong-but-long-key-wxyz")).json()["error"]
    assert error["message"].startswith("Incorrect API key provided: sk-***wxyz.")
    assert "wrong-but-long" not in error["message"]
    assert masked(b"short") == "***"


def test_health_and_other_paths_stay_open() -> None:
    c = client()
    for path in ("/health", "/metrics", "/docs"):
        assert c.get(path).status_code == 200, path


def test_metrics_need_a_key_when_asked() -> None:
    c = client(protect_metrics=True)
    assert c.get("/metrics").status_code == 401
    assert c.get("/metrics", headers=bearer(KEYS[1])).status_code == 200
    assert c.get("/health").status_code == 200


def test_a_path_that_only_starts_like_v1_is_not_protected() -> None:
    middleware = RequireApiKey(Starlette(), KEYS)
    assert middleware.needs_key("/v1") and middleware.needs_key("/v1/audio/speech")
    assert not middleware.needs_key("/v10") and not middleware.needs_key("/health")


def test_speaches_model_routes_need_the_key_too() -> None:
    middleware = RequireApiKey(Starlette(), KEYS)
    assert middleware.needs_key("/api/ps") and middleware.needs_key("/api/ps/whisper-base")
    assert not middleware.needs_key("/apiary") and not middleware.needs_key("/playground/server.js")


def test_bearer_token_takes_the_first_authorization_header() -> None:
    assert bearer_token([(b"authorization", b"Bearer  abc ")]) == b"abc"
    assert bearer_token([(b"x", b"y")]) is None
    assert bearer_token([(b"authorization", b"Token abc")]) is None


def test_no_keys_is_a_mistake_not_an_open_server() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        RequireApiKey(Starlette(), ())
