"""Issue 22 item 1, for real: a gateway process of its own (the app and HTTP server of ``mmgw
serve`` over a paced fake Triton whose contract takes guides: ``bench/hostile.py``) receives
the campaign's guides that killed it: the 2,000-deep ``$defs`` chain (SIGSEGV inside
llguidance in 0.05-0.16 s) and a grammar of thousands of chained rules. With the structural
limits lifted they reach the compiler and crash (or outrun) a sandboxed worker: a 400
``invalid_guide`` each, while the same process goes on serving and another client's stream runs
through them; with the default limits they are refused by name before any compile."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from bench.hostile import STREAM_MODEL
from bench.hostile_guides import MODEL, chain, grammar_chain
from gateway.triton.embedded import free_loopback_port

CHAT = "/v1/chat/completions"
DEEP = {"type": "json_schema", "json_schema": {"name": "deep", "schema": chain(2000)}}


async def _serving(open_limits: bool) -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    port = free_loopback_port()
    code = f"from bench.hostile import serve; serve({port}, 0.01, {open_limits!r})"
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60,
                                     trust_env=False) as http:  # fmt: skip
            for _ in range(300):
                try:
                    if (await http.get("/health/live")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            yield http, process.pid
            assert process.poll() is None, "the gateway process died"
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture
async def lifted() -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    async for served in _serving(open_limits=True):
        yield served


@pytest.fixture
async def default() -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    async for served in _serving(open_limits=False):
        yield served


async def _stream(http: httpx.AsyncClient, arrivals: list[float]) -> None:
    body = {"model": STREAM_MODEL, "messages": [{"role": "user", "content": "go"}],
            "stream": True, "max_tokens": 1_000_000}  # fmt: skip
    async with http.stream("POST", CHAT, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic())


def _ask(**fields: object) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "go"}], **fields}


async def test_guides_that_crash_the_compiler_cost_a_worker_not_the_gateway(
    lifted: tuple[httpx.AsyncClient, int],
) -> None:
    http, pid = lifted
    arrivals: list[float] = []
    streaming = asyncio.create_task(_stream(http, arrivals))
    while len(arrivals) < 10:
        await asyncio.sleep(0.01)
    crash = await http.post(CHAT, json=_ask(response_format=DEEP))
    assert crash.status_code == 400 and crash.json()["error"]["code"] == "invalid_guide"
    assert "crashed the grammar compiler (SIGSEGV)" in crash.json()["error"]["message"]
    deep_grammar = await http.post(CHAT, json=_ask(guided_grammar=grammar_chain(5000)))
    assert deep_grammar.status_code == 400, deep_grammar.text
    message = deep_grammar.json()["error"]["message"]
    assert "crashed the grammar compiler" in message or "compile_timeout_s" in message
    seen = len(arrivals)
    await asyncio.sleep(0.5)
    assert len(arrivals) > seen  # the other client's stream runs on
    plain = await http.post(CHAT, json=_ask(guided_regex="[0-9]+"))
    assert plain.status_code == 200, plain.text
    streaming.cancel()
    gap = max(b - a for a, b in itertools.pairwise(arrivals))
    print(f"\ncompile crash: gateway PID {pid} alive; the stream's largest gap {gap * 1000:.0f} ms")


async def test_with_the_default_limits_they_are_refused_by_name(
    default: tuple[httpx.AsyncClient, int],
) -> None:
    http, _ = default
    for fields, limit in (
        ({"response_format": DEEP}, "max_ref_depth"),
        ({"guided_grammar": grammar_chain(5000)}, "max_rules"),
        ({"guided_regex": "(" * 1_000_000}, "max_bytes"),
    ):
        started = time.monotonic()
        reply = await http.post(CHAT, json=_ask(**fields))
        error = reply.json()["error"]
        assert reply.status_code == 400 and error["code"] == "invalid_guide", error
        assert f"[guides] {limit}" in error["message"] and len(reply.content) < 2048
        assert time.monotonic() - started < 5
    assert json.loads((await http.post(CHAT, json=_ask(guided_regex="a+"))).text)["choices"]
