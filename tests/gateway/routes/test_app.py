"""The app's error handlers and middleware: routing errors, bodies that are not JSON, API keys
and request ids, every answer an OpenAI error object with its own code."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes.app import FakeGateway, assert_openai_error, chat, http_client
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import API_KEY, Gateways


async def test_unknown_route_is_an_openai_error(http: httpx.AsyncClient) -> None:
    error = assert_openai_error(await http.get("/v1/nothing-here"), 404, "not_found")
    assert error["param"] is None


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
        ("POST", "/v1/embeddings", 404, "not_found"),
        ("GET", "/v1/audio/transcriptions", 405, "method_not_allowed"),
        ("DELETE", "/v1/models", 405, "method_not_allowed"),
        ("POST", "/health", 405, "method_not_allowed"),
    ],
)
async def test_routing_errors_are_openai_errors_with_their_own_code(
    http: httpx.AsyncClient, method: str, path: str, status: int, code: str
) -> None:
    error = assert_openai_error(await http.request(method, path), status, code)
    assert error["type"] == "invalid_request_error"


async def test_a_405_names_the_allowed_method(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/chat/completions")
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize(
    "body",
    [b"{", b"[1, 2]", b"null", b"\xff\xfe", b'{"model": "fake-llava", "messages": "hi"}'],
    ids=["truncated", "array", "null", "not-utf8", "wrong-type"],
)
async def test_bodies_that_are_not_a_chat_request(http: httpx.AsyncClient, body: bytes) -> None:
    response = await http.post("/v1/chat/completions", content=body)
    assert_openai_error(response, 400, "invalid_request")


async def test_every_answer_carries_the_request_id(http: httpx.AsyncClient) -> None:
    for response in (
        await http.get("/v1/nothing", headers={"X-Request-Id": "rid-1"}),
        await http.post("/v1/chat/completions", content=b"{", headers={"X-Request-Id": "rid-1"}),
        await http.get("/health/live", headers={"X-Request-Id": "rid-1"}),
    ):
        assert response.headers["x-request-id"] == "rid-1"


@pytest.fixture
async def guarded(gateways: Gateways, fake: FakeTriton) -> AsyncIterator[httpx.AsyncClient]:
    gateway: FakeGateway = await gateways.get("guarded")
    async with http_client(gateway.app) as client:
        yield client


@pytest.mark.parametrize(
    "header", [None, "Bearer sk-wrong", f"Basic {API_KEY}", "Bearer ", API_KEY]
)
@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("POST", "/v1/audio/transcriptions")],
)
async def test_a_missing_or_wrong_api_key_is_a_401(
    guarded: httpx.AsyncClient, fake: FakeTriton, header: str | None, method: str, path: str
) -> None:
    headers = {"Authorization": header} if header else {}
    response = await guarded.request(method, path, json=chat(), headers=headers)
    error = assert_openai_error(response, 401, "invalid_api_key")
    assert error["type"] == "authentication_error" and error["param"] is None
    assert response.headers["www-authenticate"] == "Bearer"
    assert fake.requests == []


async def test_the_right_key_is_served_and_health_metrics_and_page_need_none(
    guarded: httpx.AsyncClient,
) -> None:
    authorised = {"Authorization": f"Bearer {API_KEY}"}
    response = await guarded.post("/v1/chat/completions", json=chat(), headers=authorised)
    assert response.status_code == 200
    assert (await guarded.get("/v1/models", headers=authorised)).status_code == 200
    for path in ("/health", "/health/live", "/metrics", "/"):
        assert (await guarded.get(path)).status_code == 200, path
