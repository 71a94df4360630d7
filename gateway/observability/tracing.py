"""Request traces: OpenTelemetry spans for where one request's time goes, off by default.

Sampling profilers see CPU, not the waits between threads, the event loop and grpc's poller
(issue 28). A trace does: one span per request, with a child per phase (body read, admission,
media fetch, the hop to the decode thread, decode, preprocess, digest, Triton send, first
token, last token), each carrying the request id that also reaches Triton, so a slow request
in an operator's trace viewer lines up with Triton's own logs and traces.

The pipeline only notes phases as (name, start, end) ``time.perf_counter()`` readings with
``phase(...)``: a context-variable read and, when tracing is off, nothing else. The spans are
built once, when the request ends (``Tracing.finish``), with those times converted to the
wall clock; so a phase noted in a worker thread or process (perf_counter is the system's
monotonic clock, shared by them) is placed exactly, and per token nothing is traced at all:
the first and last token come from the request's record.

Export is OTLP over HTTP (``opentelemetry-exporter-otlp-proto-http``, the optional ``otel``
extra), batched off the event loop by the SDK's ``BatchSpanProcessor``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.observability.record import RequestRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

__all__ = ["Phase", "Tracing", "phase", "tracing_from"]

REQUEST_ID = "mmgw.request_id"  # the attribute every span carries
SERVICE_NAME = "multimodal-gateway"


@dataclass(frozen=True)
class Phase:
    """One noted phase of a request: perf_counter start and end, and a few attributes."""

    name: str
    start: float
    end: float
    attributes: dict[str, Any] = field(default_factory=dict)


_PHASES: ContextVar[list[Phase] | None] = ContextVar("mmgw_trace_phases", default=None)


def phase(name: str, start: float, end: float | None = None, **attributes: Any) -> None:
    """Note that ``name`` ran from ``start`` to ``end`` (default: now), if this request is
    traced. Cheap enough for any per-request path (not meant per token)."""
    phases = _PHASES.get()
    if phases is not None:
        phases.append(Phase(name, start, time.perf_counter() if end is None else end, attributes))


class Tracing:
    """Turns each finished request's record and phases into spans for ``processors``."""

    def __init__(self, processors: Sequence[SpanProcessor], service: str = SERVICE_NAME) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        for processor in processors:
            self.provider.add_span_processor(processor)
        self._tracer = self.provider.get_tracer("gateway")

    def begin(self) -> tuple[list[Phase], Token[list[Phase] | None]]:
        """Start noting phases for the request running in this context."""
        phases: list[Phase] = []
        return phases, _PHASES.set(phases)

    def end(self, token: Token[list[Phase] | None]) -> None:
        _PHASES.reset(token)

    def finish(self, record: RequestRecord, phases: Sequence[Phase], now: float) -> None:
        """Emit the request's span and one child per phase, first and last token included."""
        from opentelemetry import trace

        offset = time.time_ns() - int(now * 1e9)  # perf_counter seconds -> epoch ns

        def ns(at: float) -> int:
            return int(at * 1e9) + offset

        root = self._tracer.start_span(
            f"{record.method} {record.endpoint or record.path}",
            start_time=ns(record.started),
            attributes=_request_attributes(record),
        )
        context = trace.set_span_in_context(root)
        ids = {REQUEST_ID: record.request_id}
        for noted in [*phases, *_token_phases(record, phases)]:
            span = self._tracer.start_span(
                noted.name, context, start_time=ns(noted.start), attributes=ids
            )
            if noted.attributes:
                span.set_attributes(noted.attributes)
            span.end(end_time=ns(noted.end))
        if record.status >= 500:
            root.set_status(trace.StatusCode.ERROR)
        root.end(end_time=ns(now))

    def shutdown(self) -> None:
        """Flush what is batched and stop the exporters."""
        self.provider.shutdown()


def _request_attributes(record: RequestRecord) -> dict[str, Any]:
    values = {
        REQUEST_ID: record.request_id,
        "http.request.method": record.method,
        "url.path": record.path,
        "http.response.status_code": record.status,
        "mmgw.model": record.model,
        "mmgw.error_code": record.code_label or None,
        "mmgw.media_items": record.media_items or None,
        "mmgw.tokens": record.completion_tokens or record.tokens_streamed or None,
    }
    return {key: value for key, value in values.items() if value is not None}


def _token_phases(record: RequestRecord, phases: Sequence[Phase]) -> list[Phase]:
    """First token: from the last Triton send (or the request's start) to the first token;
    last token: from the first token to the last."""
    first = record.first_token_at
    if first is None:
        return []
    sent = [p.end for p in phases if p.name == "triton.send" and p.end <= first]
    spans = [Phase("first_token", max(sent, default=record.started), first)]
    if record.last_token_at is not None and record.tokens_streamed > 1:
        tokens = {"mmgw.tokens": record.tokens_streamed}
        spans.append(Phase("last_token", first, record.last_token_at, tokens))
    return spans


def tracing_from(
    enabled: bool, endpoint: str | None, service: str = SERVICE_NAME
) -> Tracing | None:
    """The configured tracing: None when off; OTLP/HTTP export to ``endpoint`` (None: the
    SDK's default, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or http://localhost:4318/v1/traces)."""
    if not enabled:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ValueError(
            "observability.tracing is on, but the OpenTelemetry SDK and OTLP exporter are not "
            "installed: pip install 'multimodal-gateway[otel]'"
        ) from exc
    exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
    return Tracing([BatchSpanProcessor(exporter)], service)
