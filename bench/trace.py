"""``python -m bench trace``: where an image request's time goes, from the gateway's own traces.

Starts Triton with the load fixture (paced), a small OTLP/HTTP receiver on loopback and
``mmgw serve`` with ``observability.tracing`` on and pointed at it; sends ``--requests`` chat
requests with one JPEG of ``--image`` px (``--concurrency`` at a time), stops the gateway (which
flushes its spans) and prints, for each span name, how many, when it starts after the request's
start and how long it lasts (median and p90, ms), in timeline order. The gaps between phases
are the hand-offs a sampling profiler does not show.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from bench.httpstream import OPENAI_MARKER, HttpStreamClient
from bench.images import image_load
from bench.procs import parse_cpus, pin_self, say
from bench.stack import (
    AUTH_HEADER,
    REPO_ROOT,
    SERVED_ID,
    set_token_interval,
    start_gateway,
    start_triton,
)
from gateway.observability.tracing import REQUEST_ID


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--image", type=int, default=336, help="JPEG side (0: text only)")
    add("--requests", type=int, default=40, help="requests to trace (after 4 warm-ups)")
    add("--concurrency", type=int, default=1, help="requests at a time")
    add("--tokens", type=int, default=16, help="tokens per request, 30 ms apart")
    add("--gateway-cpu", default=str((os.cpu_count() or 1) - 1), help="CPU(s) or all")
    add("--gateway-workers", type=int, default=1, help="mmgw serve --workers")
    add("--out", type=Path, help="folder for the gateway's config and log")


WARM_UPS = 4
_OTEL_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
_TRACING_ENV = ("MMGW_OBSERVABILITY__TRACING", "MMGW_OBSERVABILITY__OTLP_TRACES_ENDPOINT")


class _Receiver(BaseHTTPRequestHandler):
    """OTLP/HTTP traces (protobuf) kept as they arrive."""

    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def spans_of(bodies: list[bytes]) -> list[Any]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    found = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                found.extend(scope.spans)
    return found


def _request_id(span: Any) -> str:
    for attribute in span.attributes:
        if attribute.key == REQUEST_ID:
            return str(attribute.value.string_value)
    return ""


def timeline(spans: list[Any], skip: int = 0, client: ClientTimes | None = None) -> str:
    """Per span name: count, start after the request's start and duration (median, p90);
    the first ``skip`` requests (warm-ups) left out. With ``client``, three more rows from the
    client's clock: its send to the gateway's start of the request (connection, headers,
    parsing: before any span), the gateway's first token to the client reading it, and the
    client's own time to first token (what ``bench overhead`` reports)."""
    ordered = sorted(
        (s for s in spans if not s.parent_span_id and s.name.startswith("POST")),
        key=lambda s: s.start_time_unix_nano,
    )
    roots = {s.trace_id: s for s in ordered[skip:]}
    starts: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, list[float]] = defaultdict(list)

    def note(name: str, root: Any, start_ns: int, end_ns: int) -> None:
        starts[name].append((start_ns - root.start_time_unix_nano) / 1e6)
        lengths[name].append((end_ns - start_ns) / 1e6)

    first_tokens = {s.trace_id: s for s in spans if s.name == "first_token"}
    for span in spans:
        root = roots.get(span.trace_id)
        if root is not None:
            note(span.name, root, span.start_time_unix_nano, span.end_time_unix_nano)
    for trace_id, root in roots.items() if client is not None else ():
        assert client is not None
        request_id = _request_id(root)
        sent, seen = client.sent.get(request_id), client.first_token.get(request_id)
        if sent is None or seen is None:
            continue
        note("client: send -> request start", root, sent, root.start_time_unix_nano)
        first = first_tokens.get(trace_id)
        if first is not None:
            note("client: first token relayed -> read", root, first.end_time_unix_nano, seen)
        note("client: TTFT (send -> first token read)", root, sent, seen)

    def p(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    lines = [
        "| span | count | starts at (median ms) | lasts: median ms | p90 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in sorted(starts, key=lambda n: statistics.median(starts[n])):
        lines.append(
            f"| {name} | {len(lengths[name])} | {statistics.median(starts[name]):.3f} | "
            f"{statistics.median(lengths[name]):.3f} | {p(lengths[name], 0.9):.3f} |"
        )
    return "\n".join(lines)


def _plain(span: Any) -> dict[str, Any]:
    return {
        "trace": span.trace_id.hex(),
        "name": span.name,
        "start_ns": span.start_time_unix_nano,
        "end_ns": span.end_time_unix_nano,
        "root": not span.parent_span_id,
    }


@dataclass
class ClientTimes:
    """What the client saw of each request, by the request id it sent (epoch ns)."""

    sent: dict[str, int] = field(default_factory=dict)
    first_token: dict[str, int] = field(default_factory=dict)


async def _send(
    port: int,
    body: bytes,
    count: int,
    concurrency: int,
    times: ClientTimes,
    prefix: str,
    stagger_s: float = 0.0,
) -> None:
    """``count`` requests, ``concurrency`` at a time, each user on its own keep-alive
    connection, with the load generator's own client (so its clock readings are the
    bench's TTFT); each request carries its id, to join the gateway's spans."""
    numbers = iter(range(count))

    async def user(index: int) -> None:
        # Paced requests last tokens x 30 ms: spread the users' starts over one request, so
        # arrivals are steady rather than lock-step bursts (as the load generator does).
        await asyncio.sleep(index * stagger_s / concurrency)
        client = HttpStreamClient("127.0.0.1", port, dict([AUTH_HEADER]))
        try:
            for number in numbers:
                request_id = f"{prefix}-{number}"
                headers = {"X-Request-Id": request_id}
                timing = await client.post("/v1/chat/completions", body, OPENAI_MARKER, headers)
                offset = time.time_ns() - int(time.perf_counter() * 1e9)
                times.sent[request_id] = int(timing.started * 1e9) + offset
                if timing.tokens:
                    times.first_token[request_id] = int(timing.tokens[0] * 1e9) + offset
        finally:
            await client.close()

    await asyncio.gather(*(user(index) for index in range(concurrency)))


async def run(args: argparse.Namespace) -> int:
    print(await traced(args), flush=True)
    return 0


async def traced(args: argparse.Namespace) -> str:
    """Run the traced requests ``args`` describes; the timeline table (also in ``--out``)."""
    for module in _OTEL_MODULES:  # before starting anything: a gateway without them won't start
        if importlib.util.find_spec(module) is None:
            raise RuntimeError(f"{module} is not installed")
    out = args.out or REPO_ROOT / "build" / "bench" / f"trace-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    _Receiver.bodies = []
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    saved = {name: os.environ.get(name) for name in _TRACING_ENV}
    os.environ.update(dict(zip(_TRACING_ENV, ("true", endpoint), strict=True)))
    gateway_cpus = parse_cpus(args.gateway_cpu)
    others = set(range(os.cpu_count() or 1)) - (gateway_cpus or set()) or None
    pin_self(others)
    times = ClientTimes()
    triton = await start_triton()
    try:
        await set_token_interval(triton, 30_000)
        gateway = start_gateway(triton, out, gateway_cpus, workers=args.gateway_workers)
        payload = json.dumps(_body(args.image, args.tokens)).encode()
        try:
            await _send(gateway.port, payload, WARM_UPS, 1, ClientTimes(), "warm")
            stagger = args.tokens * 0.03  # one request's length at the fixture's pace
            await _send(
                gateway.port, payload, args.requests, args.concurrency, times, "bench", stagger
            )
        finally:
            gateway.stop()  # SIGTERM: the gateway drains and flushes its last spans
    finally:
        await triton.stop()
        receiver.shutdown()
        for name, value in saved.items():  # the next gateway this process starts: untraced
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    spans = spans_of(_Receiver.bodies)
    say(f"{len(spans)} spans received")
    text = timeline(spans, skip=WARM_UPS, client=times)
    (out / "timeline.md").write_text(text + "\n")
    (out / "spans.json").write_text(json.dumps([_plain(s) for s in spans]))
    return text


def _body(image: int, tokens: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "Describe it."}]
    if image:
        load = image_load(image, SERVED_ID)
        content.insert(0, {"type": "image_url", "image_url": {"url": load.data_url}})
    return {
        "model": SERVED_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": tokens,
        "stream": True,
    }
