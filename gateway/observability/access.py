"""Pure-ASGI access middleware: a ``RequestRecord`` per request, then its metrics and log line.

It sits inside ``RequestIdMiddleware`` (so the id is known) and outside the API-key,
body-deadline and in-flight middleware (so their 401s, 408s and 429s are counted and logged
too, under the endpoint they were for). It only watches
the ``send`` channel: the status, the bytes, and for error responses the OpenAI error code
read from the (small) JSON body, so no handler has to report its error twice. A streamed
answer is complete when the wrapped app returns, so durations include the whole stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence

from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match

from gateway.observability.metrics import GatewayMetrics
from gateway.observability.middleware import ASGIApp, Message, Receive, Scope, Send
from gateway.observability.record import RequestRecord
from gateway.observability.tracing import Tracing

log = logging.getLogger("gateway.access")

# Probes and scrapes arrive every few seconds; at info they would drown the request lines.
QUIET_PATHS = frozenset({"/metrics", "/health", "/health/live"})
MAX_ERROR_BODY = 64 * 1024
# What a send to a client that went away raises, once the response has started.
CLIENT_GONE = (ClientDisconnect, OSError, asyncio.CancelledError)


def error_code_of(body: bytes) -> str | None:
    """``error.code`` (or ``error.type``) of an OpenAI error body; None if it is not one."""
    if not body or len(body) > MAX_ERROR_BODY:
        return None
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    if not isinstance(error, dict):
        return None
    code = error.get("code") or error.get("type")
    return str(code)[:64] if code else None


def endpoint_of(scope: Scope, routes: Sequence[BaseRoute] = ()) -> str:
    """The ``endpoint`` label: the path of the route that served the request or, for one
    refused before routing (the API key's 401, the in-flight cap's 429, the protocol's 408 and
    431), of the first of ``routes`` its method and path match (its path alone: a 405);
    ``unmatched`` for a path no route has (one label, so random paths mint no series)."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return str(path)
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "path", None) or "unmatched")
        if match is Match.PARTIAL and partial is None:
            partial = getattr(route, "path", None)
    return str(partial or "unmatched")


class AccessMiddleware:
    """Times, counts and logs every HTTP request."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: GatewayMetrics,
        log_body_bytes: int = 0,
        routes: Sequence[BaseRoute] = (),
        tracing: Tracing | None = None,
    ) -> None:
        self.app = app
        self.tracing = tracing  # a trace per request, when configured
        self.metrics = metrics
        self.log_body_bytes = log_body_bytes
        self.routes = routes  # to name the endpoint of a request refused before routing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        record = RequestRecord(
            request_id=state.get("request_id", ""),
            method=scope.get("method", ""),
            path=scope.get("path", ""),
            body_limit=self.log_body_bytes,
            metrics=self.metrics,
        )
        state["record"] = record
        traced = self.tracing.begin() if self.tracing is not None else None

        async def send_observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = int(message["status"])
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                record.response_bytes += len(body)
                if record.status >= 400 and record.error_code is None:
                    record.error_code = error_code_of(body)
            await send(message)

        try:
            await self.app(scope, receive, send_observed)
        except BaseException as exc:
            if record.status and isinstance(exc, CLIENT_GONE):
                record.cancelled = True  # the client left mid-response (ASGI 2.4 servers)
            elif record.status < 400:
                record.status = 500
                record.error_code = record.error_code or "internal_error"
            raise
        finally:
            record.endpoint = endpoint_of(scope, self.routes)
            self._finish(record)
            if traced is not None and self.tracing is not None:
                self.tracing.end(traced[1])
                self.tracing.finish(record, traced[0], time.perf_counter())

    def _finish(self, record: RequestRecord) -> None:
        now = time.perf_counter()
        model, endpoint = record.model_label, record.endpoint
        self.metrics.requests.labels(model, endpoint, str(record.status), record.code_label).inc()
        self.metrics.request_seconds.labels(model, endpoint).observe(now - record.started)
        if record.model_served:
            if record.prompt_tokens:
                self.metrics.tokens.labels(model, "prompt").inc(record.prompt_tokens)
            completion = record.completion_tokens or record.tokens_streamed
            if completion:
                self.metrics.tokens.labels(model, "completion").inc(completion)
            for name, count in record.media_tokens.items():  # image_tokens -> "image"
                self.metrics.media_tokens.labels(model, name.removesuffix("_tokens")).inc(count)
            if record.replica is not None and record.cached_tokens:
                cached = self.metrics.replica_cached_tokens.labels(model, record.replica)
                cached.inc(record.cached_tokens)
        level = logging.DEBUG if record.path in QUIET_PATHS else logging.INFO
        if log.isEnabledFor(level):
            log.log(level, "request", extra={"fields": record.log_fields(now)})
        if record.body is not None:  # only with the log_bodies debug switch on
            body = record.body.decode("utf-8", errors="replace")
            fields = {"request_id": record.request_id, "request_body": body}
            log.info("request body", extra={"fields": fields})
