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
import json
import os
import statistics
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx

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


def timeline(spans: list[Any], skip: int = 0) -> str:
    """Per span name: count, start after the request's start and duration (median, p90);
    the first ``skip`` requests (warm-ups) left out."""
    ordered = sorted(
        (s for s in spans if not s.parent_span_id and s.name.startswith("POST")),
        key=lambda s: s.start_time_unix_nano,
    )
    roots = {s.trace_id: s for s in ordered[skip:]}
    starts: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, list[float]] = defaultdict(list)
    for span in spans:
        root = roots.get(span.trace_id)
        if root is None:
            continue
        starts[span.name].append((span.start_time_unix_nano - root.start_time_unix_nano) / 1e6)
        lengths[span.name].append((span.end_time_unix_nano - span.start_time_unix_nano) / 1e6)

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


async def _send(url: str, body: dict[str, Any], count: int, concurrency: int) -> None:
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        queue = iter(range(count))

        async def user() -> None:
            for _ in queue:
                async with http.stream("POST", url, json=body, headers=[AUTH_HEADER]) as reply:
                    reply.raise_for_status()
                    async for _chunk in reply.aiter_bytes():
                        pass

        await asyncio.gather(*(user() for _ in range(concurrency)))


async def run(args: argparse.Namespace) -> int:
    out = args.out or REPO_ROOT / "build" / "bench" / f"trace-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    os.environ["MMGW_OBSERVABILITY__TRACING"] = "true"
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    os.environ["MMGW_OBSERVABILITY__OTLP_TRACES_ENDPOINT"] = endpoint
    gateway_cpus = parse_cpus(args.gateway_cpu)
    others = set(range(os.cpu_count() or 1)) - (gateway_cpus or set()) or None
    pin_self(others)
    triton = await start_triton()
    try:
        await set_token_interval(triton, 30_000)
        gateway = start_gateway(triton, out, gateway_cpus, workers=args.gateway_workers)
        content: list[dict[str, Any]] = [{"type": "text", "text": "Describe it."}]
        if args.image:
            load = image_load(args.image, SERVED_ID)
            content.insert(0, {"type": "image_url", "image_url": {"url": load.data_url}})
        body = {
            "model": SERVED_ID,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": args.tokens,
            "stream": True,
        }
        url = f"http://127.0.0.1:{gateway.port}/v1/chat/completions"
        try:
            await _send(url, body, WARM_UPS, 1)
            await _send(url, body, args.requests, args.concurrency)
        finally:
            gateway.stop()  # SIGTERM: the gateway drains and flushes its last spans
    finally:
        await triton.stop()
        receiver.shutdown()
    spans = spans_of(_Receiver.bodies)
    say(f"{len(spans)} spans received")
    text = timeline(spans, skip=WARM_UPS)
    (out / "timeline.md").write_text(text + "\n")
    (out / "spans.json").write_text(json.dumps([_plain(s) for s in spans]))
    print(text, flush=True)
    return 0
