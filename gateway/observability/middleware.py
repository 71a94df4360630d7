"""Pure-ASGI middleware: request ids and the in-flight cap.

Pure ASGI rather than ``BaseHTTPMiddleware``: the latter buffers streaming responses
through an extra task and loses contextvars.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from prometheus_client import Gauge

from gateway.errors import GatewayError, RateLimited
from gateway.observability.ids import hex_id
from gateway.observability.logging import REQUEST_ID
from gateway.observability.tracing import phase

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
        request_id = incoming if _SAFE_ID.match(incoming) else hex_id()
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


def has_body(scope: Scope) -> bool:
    """Whether the request's headers announce a body (HTTP/1.1: a length above 0, or chunks)."""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class InFlightLimitMiddleware:
    """Answer 429 once ``limit`` API requests are in flight, instead of queueing forever.

    A request takes its slot once its body is in: when the body's last chunk is received (the
    route reading it), or on arrival when the headers announce no body. A client that is still
    sending, or has stopped sending, holds no slot (the body deadlines bound that phase), so
    stuck uploads cannot lock real requests out. A refusal raised while the route reads the
    body becomes the route's 429 through the app's error handler; ``Retry-After`` is added
    here. The slot is given back when the app returns, whatever the path (cancellation too).

    ``gauge`` (the in-flight metric) follows the count, so dashboards see the same number
    the cap acts on.
    """

    def __init__(self, app: ASGIApp, limit: int, gauge: Gauge | None = None) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.gauge = gauge

    def _refusal(self) -> RateLimited:
        return RateLimited(f"more than {self.limit} requests in flight; retry shortly")

    def _take(self) -> bool:
        if self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        if self.gauge is not None:
            self.gauge.inc()
        return True

    def _give_back(self) -> None:
        self.in_flight -= 1
        if self.gauge is not None:
            self.gauge.dec()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        if not has_body(scope):
            if not self._take():
                await send_error(send, self._refusal(), [RETRY_AFTER])
                return
            try:
                await self.app(scope, receive, send)
            finally:
                self._give_back()
            return
        await self._after_body(scope, receive, send)

    async def _after_body(self, scope: Scope, receive: Receive, send: Send) -> None:
        held = refused = False
        reading_since: float | None = None

        async def receive_then_take() -> Message:
            nonlocal held, refused, reading_since
            reading_since = reading_since or time.perf_counter()
            message = await receive()
            last = message["type"] == "http.request" and not message.get("more_body", False)
            if last and not held:
                phase("http.body", reading_since)
                admitting = time.perf_counter()
                held = self._take()
                refused = not held
                phase("admission", admitting, admitted=held)
                if refused:
                    raise self._refusal()
            return message

        try:
            # No send wrapper (it would cost every streamed token a call): a refusal raised
            # here is answered by the app's error handler, Retry-After included.
            await self.app(scope, receive_then_take, send)
        finally:
            if held:
                self._give_back()


RETRY_AFTER = (b"retry-after", b"1")


async def send_error(
    send: Send, error: GatewayError, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """``error`` as a whole JSON response (its OpenAI error object)."""
    body = json.dumps(error.to_body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status_code,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
