"""What a connection may cost before the app runs, and how the protocol answers one that
asks for more: the limits, the raw refusal response, and the refusal's metrics and log line.

Refusals made here never reach the app, so the access middleware cannot see them; they are
counted in the same ``mmgw_requests_total`` (model ``""``, the endpoint the request line named
when it was read, else ``unmatched``) and logged as the same ``request`` line.
"""

from __future__ import annotations

import http
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import httptools
from fastapi import FastAPI
from starlette.routing import BaseRoute

from gateway.config import ServerSettings
from gateway.errors import GatewayError
from gateway.observability.access import endpoint_of
from gateway.observability.metrics import GatewayMetrics

log = logging.getLogger("gateway.access")

# After a refusal the connection is half-closed (the response, then FIN) and what the client
# still sends is read and dropped for this long: closing at once, with its bytes unread, would
# send a reset that can destroy the response before the client reads it.
LINGER_S = 2.0
MAX_LOGGED_PATH = 256


@dataclass(frozen=True)
class HttpLimits:
    """``[server]``'s connection limits, as the protocol reads them (see ``ServerSettings``)."""

    max_headers: int = 100
    max_header_bytes: int = 64 * 1024
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0  # for a body the app answered without reading

    @classmethod
    def of(cls, server: ServerSettings) -> HttpLimits:
        return cls(
            server.max_headers, server.max_header_bytes, server.header_timeout_s,
            server.body_timeout_s,
        )  # fmt: skip


def refusal_response(error: GatewayError, default_headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """``error`` as a whole HTTP/1.1 response that closes the connection."""
    body = json.dumps(error.to_body()).encode()
    phrase = http.HTTPStatus(error.status_code).phrase
    lines = [f"HTTP/1.1 {error.status_code} {phrase}".encode()]
    lines += [name + b": " + value for name, value in default_headers]
    lines += [
        b"content-type: application/json",
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class RefusalReport:
    """Counts and logs the protocol's refusals in ``app``'s metrics, as the access middleware
    does for the requests the app serves."""

    def __init__(self, app: FastAPI | None) -> None:
        state = app.state if app is not None else None
        metrics = getattr(state, "metrics", None)
        self.metrics = metrics if isinstance(metrics, GatewayMetrics) else None
        self.routes: Sequence[BaseRoute] = getattr(state, "endpoints", ())

    def __call__(self, error: GatewayError, method: str, url: bytes | None, seconds: float) -> None:
        path = _path(url)
        scope = {"type": "http", "method": method, "path": path or "", "root_path": ""}
        endpoint = endpoint_of(scope, self.routes) if path else "unmatched"
        status = str(error.status_code)
        if self.metrics is not None:
            self.metrics.requests.labels("", endpoint, status, error.code).inc()
            self.metrics.request_seconds.labels("", endpoint).observe(seconds)
        if log.isEnabledFor(logging.INFO):
            fields = {
                "method": method or None,
                "path": (path or "")[:MAX_LOGGED_PATH] or None,
                "endpoint": endpoint,
                "status": error.status_code,
                "error_code": error.code,
                "duration_ms": round(seconds * 1000, 1),
            }
            log.info("request", extra={"fields": fields})


def _path(url: bytes | None) -> str | None:
    """The path of a complete request-target, or None."""
    if not url:
        return None
    try:
        return str(httptools.parse_url(url).path.decode("latin-1"))
    except (httptools.HttpParserInvalidURLError, AttributeError):
        return None
