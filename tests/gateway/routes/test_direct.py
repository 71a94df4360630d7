"""The generation endpoints served past FastAPI's router (``routes/direct.py``): they do not
reach the router, and they answer exactly as the router would have."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import gateway.app
from gateway.routes import chat as chat_route
from gateway.routes import responses
from gateway.routes.direct import DirectRoutes, direct_routes
from tests.fakes.app import FakeGateway, chat, http_client, sse_payloads, start_gateway
from tests.fakes.triton import FakeTriton


def _direct_layer(app: Any) -> DirectRoutes:
    layer = app.middleware_stack
    while not isinstance(layer, DirectRoutes):
        layer = layer.app
    return layer


@pytest.fixture
async def own_gateway(fake: FakeTriton) -> AsyncIterator[FakeGateway]:
    built = await start_gateway(fake)
    yield built
    await built.aclose()


async def test_generation_requests_do_not_reach_the_router(own_gateway: FakeGateway) -> None:
    async with http_client(own_gateway.app) as http:
        assert (await http.get("/health/live")).status_code == 200  # builds the stack
        direct = _direct_layer(own_gateway.app)
        inner, reached = direct.app, []

        async def counting(scope: Any, receive: Any, send: Any) -> None:
            reached.append(scope["path"])
            await inner(scope, receive, send)

        direct.app = counting
        answer = await http.post("/v1/chat/completions", json=chat())
        assert answer.status_code == 200, answer.text
        refused = await http.post("/v1/completions", json={"model": "no-such", "prompt": "x"})
        assert refused.status_code == 404
        assert reached == []
        assert (await http.get("/v1/models")).status_code == 200
        wrong_method = await http.get("/v1/chat/completions")  # a 405 is the router's
        assert wrong_method.status_code == 405
        assert wrong_method.headers["allow"] == "POST"
        assert reached == ["/v1/models", "/v1/chat/completions"]


REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/chat/completions", {"content": b'{"model": "x", "messages": ['}),
    ("/v1/chat/completions", {"json": chat(model="no-such-model")}),
    ("/v1/chat/completions", {"json": chat(temperature="hot")}),
    ("/v1/chat/completions", {"json": chat(max_tokens=4)}),
    ("/v1/chat/completions", {"json": chat(max_tokens=4, stream=True)}),
    ("/v1/completions", {"json": {"model": "fake-llava", "prompt": "hi", "max_tokens": 3}}),
    ("/v1/responses", {"json": {"model": "fake-llava", "input": 7}}),
    ("/v1/audio/transcriptions", {"data": {"model": "fake-whisper"}}),
]


def _comparable(response: httpx.Response) -> tuple[int, str, Any]:
    """Status, content type and body, without what differs per request (ids, times)."""
    kind = response.headers.get("content-type", "")
    stream = kind.startswith("text/event-stream")
    body = sse_payloads(response.text) if stream else [response.json()]
    for payload in body:
        for key in ("id", "created", "system_fingerprint"):
            if isinstance(payload, dict):
                payload.pop(key, None)
    return response.status_code, kind, body


async def test_the_same_answers_as_through_the_router(
    fake: FakeTriton, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = await start_gateway(fake)
    monkeypatch.setattr(gateway.app, "DIRECT_ENDPOINTS", ())
    routed = await start_gateway(fake)
    try:
        async with http_client(direct.app) as one, http_client(routed.app) as other:
            for path, request in REQUESTS:
                fake.reset()
                first = _comparable(await one.post(path, **request))
                fake.reset()
                second = _comparable(await other.post(path, **request))
                assert first == second, (path, request)
        assert _direct_layer(routed.app).routes == {}
    finally:
        await direct.aclose()
        await routed.aclose()


def test_only_endpoints_that_take_the_request_and_runtime_alone() -> None:
    routes = [*chat_route.router.routes, *responses.router.routes]
    found = direct_routes(routes, [chat_route.chat_completions])
    assert list(found) == [("POST", "/v1/chat/completions")]
    with pytest.raises(ValueError, match="cannot be served directly"):
        direct_routes(routes, [responses.get_response])  # a path parameter
    with pytest.raises(ValueError, match="no route"):
        direct_routes(chat_route.router.routes, [responses.create_response])
