"""AccessMiddleware: one record per request -> the request counter, durations and a log line."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.errors import InvalidRequest
from gateway.observability.access import AccessMiddleware, error_code_of
from gateway.observability.logging import JsonFormatter
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.middleware import RequestIdMiddleware
from gateway.observability.record import record_of
from gateway.protocol.common import MediaTokens, UsageCounts
from tests.gateway.observability.test_metrics import samples

SECRET = "the-prompt-must-not-be-logged"


async def chat(request: Request) -> JSONResponse:
    record = record_of(request.state)
    record.keep_body(await request.body())
    record.set_model("m", served=True)
    record.on_token()
    record.on_token()
    if request.query_params.get("media"):
        usage = UsageCounts(900, 2, media=MediaTokens(image_tokens=729, video_tokens=41))
        record.set_usage(usage, "stop")
    if request.query_params.get("fail"):
        error = InvalidRequest("bad max_tokens", param="max_tokens")
        return JSONResponse(error.to_body(), status_code=400)
    return JSONResponse({"ok": True})


async def items(request: Request) -> JSONResponse:
    return JSONResponse({"id": request.path_params["item"]})


def build(metrics: GatewayMetrics, log_body_bytes: int = 0) -> RequestIdMiddleware:
    app = Starlette(
        routes=[Route("/v1/chat", chat, methods=["POST"]), Route("/items/{item}", items)]
    )
    return RequestIdMiddleware(AccessMiddleware(app, metrics, log_body_bytes=log_body_bytes))


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == "gateway.access"]


async def post(app: RequestIdMiddleware, path: str, **kwargs) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post(path, **kwargs)


async def test_counts_by_model_endpoint_status_and_code(caplog: pytest.LogCaptureFixture) -> None:
    metrics = GatewayMetrics()
    app = build(metrics)
    await post(app, "/v1/chat", content=SECRET)
    await post(app, "/v1/chat?fail=1", content=SECRET)
    got = samples(metrics)
    ok = (("code", ""), ("endpoint", "/v1/chat"), ("model", "m"), ("status", "200"))
    bad = (("code", "invalid_request"), ("endpoint", "/v1/chat"), ("model", "m"), ("status", "400"))
    assert got[("mmgw_requests_total", ok)] == 1
    assert got[("mmgw_requests_total", bad)] == 1
    assert got[("mmgw_time_to_first_token_seconds_count", (("model", "m"),))] == 2
    assert got[("mmgw_inter_token_seconds_count", (("model", "m"),))] == 2
    duration = ("mmgw_request_duration_seconds_count", (("endpoint", "/v1/chat"), ("model", "m")))
    assert got[duration] == 2


async def test_one_info_line_per_request_without_the_body(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="gateway.access")
    response = await post(
        build(GatewayMetrics()), "/v1/chat", content=SECRET, headers={"X-Request-Id": "abc-1"}
    )
    assert response.headers["x-request-id"] == "abc-1"
    [line] = access_lines(caplog)
    assert line["msg"] == "request" and line["level"] == "info"
    assert line["request_id"] == "abc-1"
    assert line["status"] == 200 and line["model"] == "m" and line["endpoint"] == "/v1/chat"
    assert line["request_bytes"] == len(SECRET) and line["response_bytes"] > 0
    assert line["duration_ms"] >= 0 and line["ttft_ms"] >= 0
    assert SECRET not in json.dumps(line)


async def test_bodies_are_logged_only_with_the_debug_switch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    await post(build(GatewayMetrics(), log_body_bytes=10), "/v1/chat", content=SECRET)
    request_line, body_line = access_lines(caplog)
    assert SECRET not in json.dumps(request_line)
    assert body_line["request_body"] == SECRET[:10]


async def test_unmatched_paths_share_one_label() -> None:
    """Random paths must not mint a series each (label cardinality)."""
    metrics = GatewayMetrics()
    await post(build(metrics), "/no/such/path/123")
    await post(build(metrics), "/another/456")
    got = samples(metrics)
    key = (("code", ""), ("endpoint", "unmatched"), ("model", ""), ("status", "404"))
    assert got[("mmgw_requests_total", key)] == 2


def test_error_code_of_reads_only_openai_error_bodies() -> None:
    assert error_code_of(json.dumps(InvalidRequest("x", code="too_many_images").to_body()).encode())
    assert error_code_of(b'{"error": {"type": "server_error"}}') == "server_error"
    assert error_code_of(b"not json") is None
    assert error_code_of(b'{"detail": "x"}') is None
    assert error_code_of(b"[1, 2]") is None


async def test_a_client_gone_mid_response_is_counted_as_cancelled_not_500() -> None:
    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise ClientDisconnect()

    metrics = GatewayMetrics()
    middleware = AccessMiddleware(app, metrics)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "GET", "path": "/x", "headers": []}
    with pytest.raises(ClientDisconnect):
        await middleware(scope, receive, send)
    got = samples(metrics)
    key = (("code", "cancelled"), ("endpoint", "unmatched"), ("model", ""), ("status", "200"))
    assert got[("mmgw_requests_total", key)] == 1


async def test_a_request_refused_before_routing_counts_under_its_endpoint() -> None:
    """A 429 (or 401) answered before the router runs names the route it was for."""

    async def refuse(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 429, "headers": []})
        await send({"type": "http.response.body", "body": b'{"error": {"code": "busy"}}'})

    metrics = GatewayMetrics()
    routes = [Route("/v1/chat", chat, methods=["POST"]), Route("/items/{item}", items)]
    app = AccessMiddleware(refuse, metrics, routes=routes)
    await post(app, "/v1/chat")
    await post(app, "/items/7")  # the path matches, the method does not: still that route
    await post(app, "/nowhere")
    got = samples(metrics)
    for endpoint in ("/v1/chat", "/items/{item}", "unmatched"):
        key = (("code", "busy"), ("endpoint", endpoint), ("model", ""), ("status", "429"))
        assert got[("mmgw_requests_total", key)] == 1, endpoint


async def test_media_tokens_are_logged_and_counted_per_model_and_modality(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    metrics = GatewayMetrics()
    await post(build(metrics), "/v1/chat?media=1", content="x")
    [line] = access_lines(caplog)
    assert line["prompt_tokens"] == 900
    assert line["image_tokens"] == 729 and line["video_tokens"] == 41
    assert "audio_tokens" not in line
    got = samples(metrics)
    assert got[("mmgw_media_tokens_total", (("modality", "image"), ("model", "m")))] == 729
    assert got[("mmgw_media_tokens_total", (("modality", "video"), ("model", "m")))] == 41
