"""``python -m bench hotpath``: CPU microseconds per token and per request in the gateway's own
Python code, measured in-process, for before/after comparisons of hot-path changes.

Why in-process: end-to-end runs on a shared 2-core machine swing by tens of percent with
other people's load; process CPU time of a fixed amount of work in one process swings far
less. Three stages:

- ``decode``: one streamed Triton response (a protobuf with ``text_output``) -> the
  gateway's ``TritonResponse`` (``gateway.triton.outputs.text_response``);
- ``app``: the whole ASGI app (middleware, route, prepare, relay, SSE framing, Starlette's
  streaming response) with a fake Triton client yielding ready-made responses and an ASGI
  ``send`` that drops the bytes: everything the gateway adds except the gRPC receive and
  the socket write, which the end-to-end ``profile`` command shows;
- ``grpc`` (``--triton``): tritonclient's stream plus the gateway's decode against the real
  bench fixture, CPU of this process only (Triton runs in its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateway.app import create_app
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.families.registry import get_family
from gateway.media.fetch import FetchLimits, MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import Offloader
from gateway.runtime import Runtime, ServedRuntime
from gateway.triton.contract import parse_model_config
from gateway.triton.outputs import text_response

WORDS = [f" w{i}" for i in range(16)]
CONFIG = {
    "name": "loadgen_ensemble",
    "max_batch_size": 8,
    "model_transaction_policy": {"decoupled": True},
    "input": [
        {"name": n, "data_type": t, "dims": [1]}
        for n, t in [
            ("text_input", "TYPE_STRING"),
            ("max_tokens", "TYPE_INT32"),
            ("stream", "TYPE_BOOL"),
            ("temperature", "TYPE_FP32"),
            ("top_k", "TYPE_INT32"),
            ("top_p", "TYPE_FP32"),
            ("return_num_input_tokens", "TYPE_BOOL"),
            ("return_num_output_tokens", "TYPE_BOOL"),
        ]
    ],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    parser.add_argument("--triton", action="store_true", help="also time the real gRPC path")
    parser.add_argument(
        "--idle-ms", type=float, default=0.0,
        help="also time one request's wall time back to back and after this long asleep",
    )  # fmt: skip


def cpu_us(work: Callable[[], None], repeat: int) -> float:
    """Best-of-``repeat`` process CPU microseconds of ``work()``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best * 1e6


def response_message(text: str, counters: bool) -> Any:
    """A streamed response as Triton sends it: BYTES ``text_output`` [1, 1], raw contents."""
    from tritonclient.grpc import service_pb2

    response = service_pb2.ModelInferResponse(model_name="loadgen_ensemble", id="r")
    out = response.outputs.add(name="text_output", datatype="BYTES", shape=[1, 1])
    del out
    data = text.encode()
    response.raw_output_contents.append(len(data).to_bytes(4, "little") + data)
    if counters:
        for name, value in (("num_input_tokens", 7), ("num_output_tokens", 64)):
            response.outputs.add(name=name, datatype="INT32", shape=[1, 1])
            response.raw_output_contents.append(value.to_bytes(4, "little"))
    return response


def time_decode(repeat: int, n: int = 20000) -> dict[str, float]:

    results = {}
    for label, counters in (("text only", False), ("text + counters", True)):
        message = response_message(" lorem", counters)

        def work(message: Any = message) -> None:
            for _ in range(n):
                text_response(message)

        results[f"decode, {label}"] = cpu_us(work, repeat) / n
    return results


class FakeClient:
    """Yields ready-made responses: the app's cost without gRPC."""

    url = "fake:1"

    def __init__(self, tokens: int) -> None:
        # Triton's protobuf messages, as the gateway's client yields them (decoding included).
        self.responses = [
            response_message(WORDS[i % len(WORDS)], False) for i in range(tokens - 1)
        ] + [response_message(" end", True)]
        self.called_at = 0.0  # when the last request reached Triton (its call started)

    async def stream(
        self, model: str, inputs: list[Any], request_id: str, outputs: Any = (), route: Any = None
    ) -> AsyncIterator[Any]:
        self.called_at = time.perf_counter()
        for response in self.responses:
            yield response


def fake_app(tokens: int) -> Any:
    model = ServedModel(id="loadgen", family="llava", triton_model="m", triton_url="fake:1")
    settings = Settings(
        models=[model], embedded=EmbeddedSettings(enabled=False), api_keys=("sk-bench",)
    )
    served = ServedRuntime(model, get_family("llava"), FakeClient(tokens))  # type: ignore[arg-type]
    served.contract = parse_model_config(CONFIG)
    runtime = Runtime(
        settings, {"loadgen": served}, {}, MediaFetcher(FetchLimits()), ExtraIdRegistry(),
        Offloader(),
    )  # fmt: skip
    app = create_app(settings, runtime)
    app.state.runtime = runtime
    return app


def chat_body(max_tokens: int, **fields: object) -> bytes:
    """A streamed chat request for the fake app's model (``fields`` added to it)."""
    request = {"model": "loadgen", "messages": [{"role": "user", "content": "hi"}],
               "max_tokens": max_tokens, "stream": True, **fields}  # fmt: skip
    return json.dumps(request).encode()


async def drive(app: Any, body: bytes, requests: int) -> int:
    """Send ``requests`` streamed chat completions through the ASGI app; bytes answered."""
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer sk-bench"),
        (b"content-length", str(len(body)).encode()),
    ]
    total = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal total
        total += len(message.get("body", b""))

    for _ in range(requests):
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "", "headers": headers,
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {},
        }  # fmt: skip
        await app(scope, receive, send)
    return total


def time_app(requests: int, tokens: int, repeat: int) -> dict[str, float]:
    import uvloop

    def run(count: int) -> float:
        app = fake_app(count)
        body = chat_body(count)
        loop = uvloop.new_event_loop()
        try:
            loop.run_until_complete(drive(app, body, 20))  # warm-up
            return cpu_us(lambda: loop.run_until_complete(drive(app, body, requests)), repeat)
        finally:
            loop.close()

    one, many = run(1), run(tokens)
    return {
        "app, per request (1 token)": one / requests,
        f"app, per token ({tokens}-token answers)": (many - one) / requests / (tokens - 1),
    }


def time_idle(idle_ms: float, samples: int = 40) -> dict[str, float]:
    """One 1-token request's wall time through the app (microseconds, median), and the part
    of it before the Triton call starts (what a first token waits for), back to back and
    after ``idle_ms`` asleep. A paced load leaves the core idle between requests, and the
    same code then runs several times slower (caches and branch predictors cold, the clock
    down): the longer a request's path, the more it pays, which a back-to-back CPU figure
    does not show."""
    import statistics

    import uvloop

    app, body = fake_app(1), chat_body(1)
    client = app.state.runtime.models["loadgen"].client

    async def medians_us(gap_s: float) -> tuple[float, float]:
        walls, to_call = [], []
        for _ in range(samples):
            if gap_s:
                await asyncio.sleep(gap_s)
            started = time.perf_counter()
            await drive(app, body, 1)
            walls.append(time.perf_counter() - started)
            to_call.append(client.called_at - started)
        return statistics.median(walls) * 1e6, statistics.median(to_call) * 1e6

    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(drive(app, body, 50))  # warm-up
        warm = loop.run_until_complete(medians_us(0.0))
        cold = loop.run_until_complete(medians_us(idle_ms / 1000))
    finally:
        loop.close()
    return {
        "app, one request's wall time, back to back": warm[0],
        "app, to the Triton call, back to back": warm[1],
        f"app, one request's wall time, after {idle_ms:g} ms idle": cold[0],
        f"app, to the Triton call, after {idle_ms:g} ms idle": cold[1],
    }


def main(args: argparse.Namespace) -> int:
    import os

    from gateway.observability.logging import configure_logging

    # The JSON access line per request is part of the deployed cost: written, to nowhere.
    configure_logging("json", "info", open(os.devnull, "w"))  # noqa: SIM115
    figures = time_decode(args.repeat)
    figures.update(time_app(args.requests, args.tokens, args.repeat))
    if args.triton:
        from bench.hotpath_grpc import time_grpc

        figures.update(time_grpc())
    if args.idle_ms > 0:
        figures.update(time_idle(args.idle_ms))
    for label, value in figures.items():
        print(f"{value:9.2f} us  {label}", flush=True)
    return 0
