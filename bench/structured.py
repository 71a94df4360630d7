"""``python -m bench structured``: what structured outputs and tools cost in the gateway itself.

- the compile time of a large JSON schema with llguidance, cold (a fresh verdict cache) and
  cached (the digest lookup every later request with that schema pays);
- the in-process CPU per request of a streamed chat completion with plain text, with a
  ``json_schema`` response format (cached verdict) and with ``tools`` (auto: the Hermes
  parser reading every token), on the same fake Triton client as ``bench hotpath`` (no gRPC).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from bench.hotpath import CONFIG, FakeClient, chat_body, cpu_us, drive
from gateway.app import create_app
from gateway.config import EmbeddedSettings, GuideSettings, ServedModel, Settings
from gateway.families.calls import Guide
from gateway.families.registry import get_family
from gateway.guides import GUIDE_WORKER_MODULES
from gateway.guides.compile import compile_error, guide_error
from gateway.media.fetch import FetchLimits, MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import Offloader
from gateway.runtime import Runtime, ServedRuntime
from gateway.sandbox import SandboxPool, VerdictCache
from gateway.triton.contract import parse_model_config

GUIDED_CONFIG = {
    **CONFIG,
    "input": [
        *CONFIG["input"],
        {"name": "guided_decoding_guide_type", "data_type": "TYPE_STRING", "dims": [1]},
        {"name": "guided_decoding_guide", "data_type": "TYPE_STRING", "dims": [1]},
    ],
}
SMALL_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}  # fmt: skip
TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "parameters": SMALL_SCHEMA}}
    for i in range(4)
]


def large_schema(fields: int = 400) -> dict[str, Any]:
    """A wide, nested schema of the kind agent frameworks send: objects, enums, bounded
    numbers, arrays, optional fields, ``anyOf`` and ``$defs`` references."""
    defs = {
        f"Item{i}": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 0, "maximum": 10**6},
                "kind": {"enum": [f"k{i}_{j}" for j in range(8)]},
                "note": {"anyOf": [{"type": "string", "maxLength": 80}, {"type": "null"}]},
                "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 5},
            },
            "required": ["id", "kind"],
            "additionalProperties": False,
        }
        for i in range(fields // 8)
    }
    properties = {
        f"field_{i}": {"$ref": f"#/$defs/Item{i % len(defs)}"} if i % 2 else {"type": "string"}
        for i in range(fields)
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties)[: fields // 2],
        "additionalProperties": False,
        "$defs": defs,
    }


def time_compile(repeat: int) -> dict[str, float]:
    """The compile alone (in this process), then a cached verdict as a request pays it."""
    text = json.dumps(large_schema())
    cold = min(_timed(lambda: compile_error("json_schema", text)) for _ in range(repeat))
    cached = asyncio.run(_cached_us(Guide("json_schema", text), repeat))
    print(f"large schema: {len(text)} bytes of JSON", flush=True)
    return {"compile, cold (ms)": cold * 1e3, "compile, cached (us)": cached}


async def _cached_us(guide: Guide, repeat: int) -> float:
    limits, cache = GuideSettings(), VerdictCache()
    pool = SandboxPool(limits.sandbox_limits(), preload=GUIDE_WORKER_MODULES)
    await guide_error(guide, limits, pool, cache)  # compiled once, in the sandbox
    hits, best = 2000, float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(hits):
            await guide_error(guide, limits, pool, cache)
        best = min(best, time.perf_counter() - started)
    await pool.aclose()
    return best / hits * 1e6


def _timed(work: Any) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def guided_app(tokens: list[str]) -> Any:
    model = ServedModel(id="loadgen", family="llava", triton_model="m", triton_url="fake:1")
    settings = Settings(
        models=[model], embedded=EmbeddedSettings(enabled=False), api_keys=("sk-bench",)
    )
    client = FakeClient(1)
    client.responses = _responses(tokens)  # the model's answer, a piece per token
    served = ServedRuntime(model, get_family("llava"), client)  # type: ignore[arg-type]
    served.contract = parse_model_config(GUIDED_CONFIG)
    runtime = Runtime(
        settings, {"loadgen": served}, {}, MediaFetcher(FetchLimits()), ExtraIdRegistry(),
        Offloader(),
    )  # fmt: skip
    app = create_app(settings, runtime)
    app.state.runtime = runtime
    return app


def _responses(tokens: list[str]) -> list[Any]:
    from bench.hotpath import response_message

    return [response_message(t, False) for t in tokens[:-1]] + [response_message(tokens[-1], True)]


def time_requests(requests: int, repeat: int) -> dict[str, float]:
    import uvloop

    answer = json.dumps({"name": "Ada", "age": 36, "tags": ["x", "y"]})
    call = '<tool_call>\n{"name": "tool_1", "arguments": ' + answer + "}\n</tool_call>"
    cases = {
        "plain text": ({}, [answer[i : i + 4] for i in range(0, len(answer), 4)]),
        "json_schema": (
            {"response_format": {"type": "json_schema",
                                 "json_schema": {"name": "P", "schema": SMALL_SCHEMA}}},
            [answer[i : i + 4] for i in range(0, len(answer), 4)],
        ),
        "large json_schema": (
            {"response_format": {"type": "json_schema",
                                 "json_schema": {"name": "L", "schema": large_schema()}}},
            [answer[i : i + 4] for i in range(0, len(answer), 4)],
        ),
        "plain text, the call's text": ({}, _pieces(call)),
        "tools (auto, parsed)": ({"tools": TOOLS}, _pieces(call)),
    }  # fmt: skip
    results: dict[str, float] = {}
    for label, (fields, tokens) in cases.items():
        app = guided_app(tokens)
        body = chat_body(256, **fields)
        loop = uvloop.new_event_loop()
        try:
            loop.run_until_complete(drive(app, body, 20))  # warm-up (and the compile)
            total = cpu_us(_driver(loop, app, body, requests), repeat)
        finally:
            loop.close()
        results[f"request, {label} ({len(tokens)} tokens) (us)"] = total / requests
    return results


def _pieces(text: str) -> list[str]:
    """``text`` as a model streams it: a piece of four characters per token."""
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def _driver(loop: Any, app: Any, body: bytes, requests: int) -> Any:
    return lambda: loop.run_until_complete(drive(app, body, requests))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")


def main(args: argparse.Namespace) -> int:
    from gateway.observability.logging import configure_logging

    configure_logging("json", "info", open(os.devnull, "w"))  # noqa: SIM115
    figures = time_compile(args.repeat)
    figures.update(time_requests(args.requests, args.repeat))
    for label, value in figures.items():
        print(f"{value:10.2f}  {label}", flush=True)
    requests = {k.split(" (")[0].removeprefix("request, "): v for k, v in figures.items()}
    for label, base in (("json_schema", "plain text"), ("large json_schema", "plain text"),
                        ("tools", "plain text, the call's text")):  # fmt: skip
        print(f"{requests[label] / requests[base]:10.2f}x {label} vs {base}")
    print(f"{figures['compile, cold (ms)'] * 1e3 / figures['compile, cached (us)']:10.0f}x "
          "cold compile vs cached verdict")  # fmt: skip
    return 0
