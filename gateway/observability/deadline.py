"""The body deadlines: a request's body must be in within ``total_s`` of its headers, the
server never waits more than ``idle_s`` for its next bytes, and after a grace period the body
must keep a minimum average rate (Apache's ``MinRate``: each byte received extends the deadline
by ``1 / bytes_per_s`` seconds), so a body trickled a byte a second is closed after the grace
instead of holding its connection and slot until ``total_s``.

Enforced on the ASGI ``receive`` channel the route reads the body through, so nothing waits
for a body nobody reads: a wait past either deadline raises ``RequestTimeout`` there, which the
app's error handler answers as 408 ``request_timeout``; this middleware marks that response
``Connection: close`` (the rest of the body is never read, so the connection cannot carry
another request). A client that leaves before its body is in ends as a quiet 499, counted as
``cancelled``, instead of an unhandled ``ClientDisconnect`` and its traceback. Once the body is
in, ``receive`` passes straight through (the disconnect watchers of a stream use it).

The idle wait is timed from each ``receive`` call, not from the previous chunk: time the app
spends between reads is not the client's.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

from starlette.requests import ClientDisconnect

from gateway.errors import RequestTimeout
from gateway.observability.middleware import ASGIApp, Message, Receive, Scope, Send, has_body
from gateway.observability.record import RequestRecord

CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left; nobody reads it
CLOSE = (b"connection", b"close")

if sys.version_info >= (3, 11):

    async def _within(receive: Receive, seconds: float) -> Message:
        async with asyncio.timeout(seconds):  # no task per call, unlike wait_for before 3.12
            return await receive()

else:  # pragma: no cover

    async def _within(receive: Receive, seconds: float) -> Message:
        return await asyncio.wait_for(receive(), seconds)


@dataclass(frozen=True)
class MinRate:
    """The slowest average a body may arrive at once ``grace_s`` have passed (0: any)."""

    bytes_per_s: float = 0.0
    grace_s: float = 0.0


class _Body:
    """One request's ``receive``, timed until the body's last chunk (or a disconnect)."""

    def __init__(self, receive: Receive, total_s: float, idle_s: float, rate: MinRate) -> None:
        self._receive = receive
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self._deadline = self._started + total_s
        self._idle_s = idle_s
        self._rate = rate
        self._received = 0
        self.done = False  # the last chunk or a disconnect arrived: no more deadlines
        self.left = False  # the client disconnected before its body was in
        self.timed_out = False

    async def receive(self) -> Message:
        if self.done:
            return await self._receive()
        now = self._loop.time()
        wait, why = self._deadline - now, "total"
        if self._idle_s < wait:
            wait, why = self._idle_s, "idle"
        if self._rate.bytes_per_s > 0 and (rate := self._rate_wait(now)) < wait:
            wait, why = rate, "rate"
        try:
            message = await _within(self._receive, max(wait, 0.0))
        except asyncio.TimeoutError:
            self.timed_out = True
            raise self._timeout(why) from None
        if message["type"] == "http.disconnect":
            self.done = self.left = True
        else:
            self._received += len(message.get("body", b""))
            self.done = not message.get("more_body", False)
        return message

    def _rate_wait(self, now: float) -> float:
        """Until the minimum rate's deadline: the grace, plus 1/rate s per byte received."""
        rate = self._rate
        return self._started + rate.grace_s + self._received / rate.bytes_per_s - now

    def _timeout(self, why: str) -> RequestTimeout:
        if why == "total":
            return RequestTimeout("the request body did not arrive in time")
        if why == "rate":
            return RequestTimeout(
                f"the request body arrived slower than {self._rate.bytes_per_s:g} bytes/s "
                f"({self._received} bytes in {self._loop.time() - self._started:.0f} s)"
            )
        return RequestTimeout(f"no request body bytes arrived for {self._idle_s:g} s")


class BodyDeadlineMiddleware:
    """408 for a body that comes too slowly; a quiet 499 for a client gone before its body."""

    def __init__(
        self, app: ASGIApp, total_s: float, idle_s: float, min_rate: MinRate | None = None
    ) -> None:
        self.app = app
        self.total_s = total_s
        self.idle_s = idle_s
        self.min_rate = min_rate or MinRate()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.app(scope, receive, send)
            return
        body = _Body(receive, self.total_s, self.idle_s, self.min_rate)

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and body.timed_out:
                message["headers"] = [*message.get("headers", []), CLOSE]
            await send(message)

        try:
            await self.app(scope, body.receive, send_closing)
        except ClientDisconnect:
            if not body.left:
                raise
            record = scope.get("state", {}).get("record")
            if isinstance(record, RequestRecord):
                record.cancelled = True
            await send({"type": "http.response.start", "status": CLIENT_CLOSED_REQUEST})
            await send({"type": "http.response.body", "body": b""})
