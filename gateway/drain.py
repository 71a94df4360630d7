"""A graceful stop that ends every request well-formed (pure-ASGI middleware).

On SIGTERM the server stops accepting connections and gives the requests in flight until
``server.drain_timeout_s`` to finish (uvicorn's graceful shutdown). ``Drain.begin`` is called
at that moment. From then on a new ``/v1/`` request gets ``503 server_shutting_down`` with
``Retry-After``, and shortly before the server's own deadline every request still running is
ended here, by cancelling it (which cancels its Triton call) and answering for it:

- a response that has not started: ``503 server_shutting_down`` with ``Retry-After``;
- an event stream already streaming: the cancellation carries ``errors.SHUTDOWN``, which the
  relay (or the stream's writer) reads as ``ShuttingDown``, so the endpoint ends the stream
  its own way (chat: an ``error`` event and ``[DONE]``; Responses: ``response.failed``)
  and clients see why it stopped;
- anything else already started: the end of its body.

Without this, the server's own deadline cancels them mid-body: streams cut with no event, and
unstarted requests answered with a plain-text 500.

Realtime sessions (WebSockets) are not requests the middleware sees: before the server closes
its connections, ``finish_sessions`` asks each to take no more audio, finish the utterances
already committed (their ``completed`` events sent) and close with 1012, within the grace.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import SHUTDOWN, ShuttingDown, shutting_down
from gateway.observability.middleware import ASGIApp, Receive, Scope, Send
from gateway.observability.record import RequestRecord

CUT_MARGIN_S = 1.0  # requests are ended this long before the server's own deadline


__all__ = ["Drain", "DrainMiddleware", "ShuttingDown", "draining_server"]


@dataclass(eq=False)  # identity: one per request, kept in a set
class _Call:
    task: asyncio.Task[Any]
    scope: Scope
    cut: bool = False

    @property
    def record(self) -> RequestRecord | None:
        record = self.scope.get("state", {}).get("record")
        return record if isinstance(record, RequestRecord) else None

    @property
    def started(self) -> bool:
        """The response has begun (the access record saw its status; no send wrapper here,
        which would cost every streamed token a call)."""
        record = self.record
        return record is not None and record.status != 0


@dataclass
class Drain:
    """Shared by the middleware (which tracks requests) and the server (which starts it)."""

    draining: bool = False
    calls: set[_Call] = field(default_factory=set)
    _timer: asyncio.TimerHandle | None = None
    # Long-lived connections (realtime WebSocket sessions): each told to finish within the
    # grace before the server's shutdown closes every connection (uvicorn closes WebSockets
    # at once, with 1012 and no last event).
    finishers: list[Callable[[float], Awaitable[None]]] = field(default_factory=list)

    async def finish_sessions(self, grace_s: float) -> None:
        """Let every long-lived session finish what it is doing, for at most ``grace_s``."""
        if self.finishers:
            await asyncio.gather(*(finish(grace_s) for finish in self.finishers))

    def begin(self, grace_s: float) -> None:
        """Refuse new requests from now on; end the running ones before ``grace_s`` is up."""
        if self.draining:
            return
        self.draining = True
        delay = max(0.0, grace_s - CUT_MARGIN_S)
        self._timer = asyncio.get_running_loop().call_later(delay, self.cut)

    def cut(self) -> None:
        """End every request still running (each answers for itself as it unwinds)."""
        for call in list(self.calls):
            if not call.task.done():
                call.cut = True
                call.task.cancel(SHUTDOWN)


class DrainMiddleware:
    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        if self.drain.draining:
            await _refuse(send)
            return
        task = asyncio.current_task()
        assert task is not None
        call = _Call(task, scope)
        self.drain.calls.add(call)
        try:
            await self.app(scope, receive, send)
            if call.cut:  # a stream its endpoint ended (``ShuttingDown``)
                _record(call)
        except asyncio.CancelledError:
            if not call.cut:
                raise
            # Cancelled outside the relay (preparing the request, or between frames).
            _took_back_cancel()
            _record(call)
            await _end(call, send)
        finally:
            self.drain.calls.discard(call)


def _took_back_cancel() -> None:
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)  # Python 3.11+
    if uncancel is not None:
        uncancel()


def _record(call: _Call) -> None:
    record = call.record
    if record is not None:
        record.cancelled = False  # the server ended it, not the client
        record.error_code = "server_shutting_down"


async def _refuse(send: Send) -> None:
    error = shutting_down()
    retry_after = str(error.retry_after_s or 1).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", retry_after)]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(error.to_body()).encode()})


async def _end(call: _Call, send: Send) -> None:
    if not call.started:
        await _refuse(send)
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def draining_server(
    config: Any,
    drain: Drain,
    grace_s: float,
    on_listening: Callable[[tuple[str, int]], None] | None = None,
) -> Any:
    """A uvicorn ``Server`` that starts ``drain`` when it is told to exit (SIGTERM, SIGINT),
    and calls ``on_listening`` with its socket's ``(host, port)`` once it accepts
    connections."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            self._drain_loop = asyncio.get_running_loop()
            await super().startup(sockets=sockets)
            listening = [s for server in self.servers for s in server.sockets]
            if on_listening is not None and self.started and listening:
                on_listening(listening[0].getsockname()[:2])

        async def shutdown(self, sockets: Any = None) -> None:
            # uvicorn's first step (no new connections), then the sessions' last utterances,
            # then the rest of its shutdown (which closes every connection still open).
            for server in getattr(self, "servers", []):
                server.close()
            await drain.finish_sessions(max(0.0, grace_s - CUT_MARGIN_S))
            await super().shutdown(sockets=sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            loop = getattr(self, "_drain_loop", None)
            if loop is not None:
                loop.call_soon_threadsafe(drain.begin, grace_s)
            super().handle_exit(sig, frame)

    return DrainingServer(config)
