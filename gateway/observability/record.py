"""What one request did, filled in as it runs and read once at its end.

The access middleware creates a ``RequestRecord`` per HTTP request and puts it in the ASGI
scope's state (``request.state.record``); the chat route and the relay fill in the model,
token timings, usage and sizes; at the end the middleware turns it into the request counter,
the duration histogram and the one access-log line. Keeping these facts in one plain object
means the pipeline never logs or formats anything per token: ``on_token`` is a clock read and
at most one histogram ``observe``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gateway.observability.metrics import GatewayMetrics
from gateway.protocol.common import UsageCounts

MAX_MODEL_CHARS = 128
UNKNOWN_MODEL = "unknown"  # metric label for ids no served model has (bounds cardinality)


@dataclass
class RequestRecord:
    """Facts about one request. Times are ``time.perf_counter()`` readings."""

    request_id: str
    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    body_limit: int = 0  # >0 only when the debug switch for logging bodies is on
    metrics: GatewayMetrics | None = None
    endpoint: str = ""
    model: str | None = None
    model_served: bool = False
    stream: bool | None = None
    status: int = 0
    error_code: str | None = None
    cancelled: bool = False
    finish_reason: str | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    tokens_streamed: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    media_tokens: dict[str, int] = field(default_factory=dict)  # image_tokens, video_tokens...
    replica: str | None = None  # the Triton replica that answered, when a set of them serves
    media_items: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    body: bytes | None = None
    _first_token: Any = None  # labelled Histogram children, resolved once per request
    _inter_token: Any = None

    def set_model(self, model: str, served: bool) -> None:
        """Name the model once it is known, and bind its per-token histograms."""
        self.model = model[:MAX_MODEL_CHARS]
        self.model_served = served
        if served and self.metrics is not None:
            self._first_token = self.metrics.first_token_seconds.labels(model)
            self._inter_token = self.metrics.inter_token_seconds.labels(model)

    def keep_body(self, raw: bytes) -> None:
        """Remember the request body for the debug log, only when that switch is on."""
        self.request_bytes = len(raw)
        if self.body_limit > 0:
            self.body = raw[: self.body_limit]

    def on_token(self) -> None:
        """One generated token arrived. Called per token, so kept to the bare minimum."""
        now = time.perf_counter()
        last = self.last_token_at
        if last is None:
            self.first_token_at = now
            if self._first_token is not None:
                self._first_token.observe(now - self.started)
        elif self._inter_token is not None:
            self._inter_token.observe(now - last)
        self.last_token_at = now
        self.tokens_streamed += 1

    def set_usage(self, usage: UsageCounts, finish_reason: str) -> None:
        self.prompt_tokens = usage.prompt_tokens
        self.completion_tokens = usage.completion_tokens
        self.cached_tokens = usage.cached_tokens
        self.media_tokens = usage.media.fields() if usage.media is not None else {}
        self.finish_reason = finish_reason

    @property
    def model_label(self) -> str:
        """The metric label: a served id, 'unknown' for any other id, '' when none applies."""
        if self.model is None:
            return ""
        return self.model if self.model_served else UNKNOWN_MODEL

    @property
    def code_label(self) -> str:
        if self.error_code:
            return self.error_code
        return "cancelled" if self.cancelled else ""

    def log_fields(self, now: float) -> dict[str, Any]:
        """The access line's fields: ids, outcome, timings (ms) and sizes; never content."""
        fields: dict[str, Any] = {
            "request_id": self.request_id,
            "method": self.method,
            "path": self.path,
            "endpoint": self.endpoint,
            "status": self.status,
            "duration_ms": _ms(now - self.started),
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
        }
        optional = {
            "model": self.model,
            "stream": self.stream,
            "error_code": self.code_label or None,
            "finish_reason": self.finish_reason,
            "media_items": self.media_items or None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "replica": self.replica,
        }
        fields.update({k: v for k, v in optional.items() if v is not None})
        fields.update(self.media_tokens)
        fields.update(self._token_timings())
        return fields

    def _token_timings(self) -> dict[str, float]:
        if self.first_token_at is None:
            return {}
        timings = {"ttft_ms": _ms(self.first_token_at - self.started)}
        tokens = self.completion_tokens or self.tokens_streamed
        span = (self.last_token_at or self.first_token_at) - self.first_token_at
        if tokens > 1 and span > 0:
            timings["tokens_per_s"] = round((tokens - 1) / span, 1)
        return timings


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def record_of(state: Any) -> RequestRecord:
    """The request's record from ``request.state``; a detached one if no middleware made one
    (an app assembled without ``AccessMiddleware``), so callers never need to check."""
    record = getattr(state, "record", None)
    if not isinstance(record, RequestRecord):
        record = RequestRecord(getattr(state, "request_id", ""), "", "")
        state.record = record
    return record
