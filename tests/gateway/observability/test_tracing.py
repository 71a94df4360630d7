"""Request traces: off by default; when on, a span per request with a child per phase, each
with the request id Triton gets, exported over OTLP/HTTP to a real receiver on loopback."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.config import Settings
from gateway.observability.tracing import REQUEST_ID, Tracing, phase, tracing_from
from tests.fakes.app import FakeGateway, chat, data_url, http_client, image_part, png, start_gateway
from tests.fakes.triton import FakeTriton

IMAGE_PHASES = [
    "http.body",
    "admission",
    "media.fetch",
    "media.hop_to_job",
    "media.decode",
    "media.preprocess",
    "media.digest",
    "media.hop_back",
    "media.prepare",
    "chat.plan",
    "first_token",
    "last_token",
]


class OtlpReceiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace endpoint (protobuf bodies at /v1/traces), as a collector serves it."""

    received: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ok = self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
        if ok:
            self.received.append(ExportTraceServiceRequest.FromString(body))
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), OtlpReceiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
async def traced(receiver: str) -> AsyncIterator[tuple[FakeGateway, InMemorySpanExporter]]:
    fake = FakeTriton()
    observability = {"tracing": True, "otlp_traces_endpoint": receiver}
    gateway = await start_gateway(fake, observability=observability)
    tracing = gateway.app.state.tracing
    assert isinstance(tracing, Tracing)
    memory = InMemorySpanExporter()
    tracing.provider.add_span_processor(SimpleSpanProcessor(memory))
    yield gateway, memory
    tracing.shutdown()
    await gateway.aclose()


def test_tracing_is_off_by_default() -> None:
    settings = Settings()
    assert settings.observability.tracing is False
    assert tracing_from(False, None) is None
    phase("media.decode", 0.0, 1.0)  # no request is traced: nothing noted, nothing raised


async def test_an_image_request_has_a_span_per_phase_with_the_request_id(
    traced: tuple[FakeGateway, InMemorySpanExporter],
) -> None:
    gateway, memory = traced
    memory.clear()
    body = chat([image_part(data_url(png(3))), {"type": "text", "text": "hi"}], "fake-llava")
    async with http_client(gateway.app) as client:
        response = await client.post(
            "/v1/chat/completions", json=body, headers={"X-Request-Id": "trace-me-1"}
        )
    assert response.status_code == 200, response.text
    assert [r.request_id for r in gateway.fake.requests] == ["trace-me-1"]  # what Triton got
    spans = memory.get_finished_spans()
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "POST /v1/chat/completions"
    assert root.attributes is not None and root.attributes[REQUEST_ID] == "trace-me-1"
    assert root.attributes["mmgw.media_items"] == 1
    children = [s for s in spans if s.parent is not None]
    assert [s.name for s in children] == IMAGE_PHASES
    for span in children:
        assert span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert span.attributes is not None and span.attributes[REQUEST_ID] == "trace-me-1"
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time, span.name
    by_name = {s.name: s for s in children}
    # The phases follow each other: decode, then preprocess, then digest, in the job.
    decode, preprocess = by_name["media.decode"], by_name["media.preprocess"]
    assert decode.end_time <= preprocess.start_time <= by_name["media.digest"].start_time


async def test_spans_reach_an_otlp_http_receiver(
    traced: tuple[FakeGateway, InMemorySpanExporter],
) -> None:
    gateway, _ = traced
    OtlpReceiver.received.clear()
    async with http_client(gateway.app) as client:
        body = chat([{"type": "text", "text": "hi"}], "fake-llava")
        response = await client.post(
            "/v1/chat/completions", json=body, headers={"X-Request-Id": "trace-me-2"}
        )
    assert response.status_code == 200, response.text
    assert gateway.app.state.tracing.provider.force_flush(10_000)
    exported = [
        span
        for request in OtlpReceiver.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    mine = [
        s
        for s in exported
        if {a.key: a.value.string_value for a in s.attributes}.get(REQUEST_ID) == "trace-me-2"
    ]
    names = {s.name for s in mine}
    assert {"POST /v1/chat/completions", "http.body", "admission", "first_token"} <= names
    assert not any(n.startswith("media.") for n in names)  # a text request has no media phases
    services = {
        a.value.string_value
        for request in OtlpReceiver.received
        for resource in request.resource_spans
        for a in resource.resource.attributes
        if a.key == "service.name"
    }
    assert services == {"multimodal-gateway"}
