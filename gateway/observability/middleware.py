"""Pure-ASGI middleware: request ids and the in-flight cap.

Pure ASGI rather than ``BaseHTTPMiddleware``: the latter buffers streaming responses
through an extra task and loses contextvars.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import Gauge

from gateway.errors import RateLimited
from gateway.observability.logging import REQUEST_ID

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class RequestIdMiddleware:
    """Accept ``X-Request-Id`` (if sane) or make one; expose it, log with it, echo it back.

    The id reaches Triton as its request id (the chat route passes it to the relay) and
    every log line written while serving the request (through a ContextVar).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


class InFlightLimitMiddleware:
    """Answer 429 once ``limit`` API requests are in flight, instead of queueing forever.

    ``gauge`` (the in-flight metric) follows the count, so dashboards see the same number
    the cap acts on.
    """

    def __init__(self, app: ASGIApp, limit: int, gauge: Gauge | None = None) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.gauge = gauge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            error = RateLimited(f"more than {self.limit} requests in flight; retry shortly")
            body = json.dumps(error.to_body()).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": error.status_code,
                    "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        self.in_flight += 1
        if self.gauge is not None:
            self.gauge.inc()
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            if self.gauge is not None:
                self.gauge.dec()
