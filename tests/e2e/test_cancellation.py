"""A client that goes away cancels its Triton request: generation stops at the next token.

Watched through the reference model's Triton custom metric
``mmgw_reference_generated_tokens_total``: after the client disconnects, the counter must
stop moving although the request asked for thousands of tokens (``min_tokens`` keeps the
model from ending early on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import re

import httpx
import pytest

from gateway.triton.embedded import EmbeddedTriton

pytestmark = pytest.mark.e2e

LONG = {
    "model": "reference-llava",
    "messages": [{"role": "user", "content": "Tell me everything."}],
    "max_tokens": 3000,
    "min_tokens": 3000,
    "temperature": 0.8,
}


async def generated_tokens(triton: EmbeddedTriton) -> float:
    async with httpx.AsyncClient(trust_env=False) as http:
        text = (await http.get(f"http://127.0.0.1:{triton.metrics_port}/metrics")).text
    match = re.search(
        r'^mmgw_reference_generated_tokens_total\{model="reference_llava"\} (\S+)$', text, re.M
    )
    return float(match.group(1)) if match else 0.0


async def assert_generation_stops(triton: EmbeddedTriton, before: float) -> None:
    await asyncio.sleep(1.0)
    settled = await generated_tokens(triton)
    await asyncio.sleep(1.0)
    later = await generated_tokens(triton)
    assert later == settled, "the model kept generating after the client left"
    assert settled - before < LONG["max_tokens"], "the request ran to completion"


async def test_closing_an_sse_stream_cancels_generation(
    gateway_url: str, embedded_triton: EmbeddedTriton
) -> None:
    before = await generated_tokens(embedded_triton)
    async with (
        httpx.AsyncClient(base_url=gateway_url, timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=LONG | {"stream": True}) as response,
    ):
        assert response.status_code == 200
        chunks = 0
        async for line in response.aiter_lines():
            if line.startswith("data: ") and '"content"' in line:
                chunks += 1
            if chunks >= 24:  # the model reports tokens in batches of 8
                break
    assert await generated_tokens(embedded_triton) > before
    await assert_generation_stops(embedded_triton, before)


async def test_abandoning_a_non_streamed_request_cancels_generation(
    gateway_url: str, embedded_triton: EmbeddedTriton
) -> None:
    before = await generated_tokens(embedded_triton)
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        request = asyncio.create_task(http.post("/v1/chat/completions", json=LONG))
        # Leave once the model is generating (not after a fixed time: on a loaded machine the
        # first tokens can take longer than any small timeout).
        for _ in range(600):
            if await generated_tokens(embedded_triton) > before or request.done():
                break
            await asyncio.sleep(0.1)
        assert not request.done(), "the request ended before the client left"
        request.cancel()  # the connection is closed under the waiting request
        with contextlib.suppress(asyncio.CancelledError):
            await request
    assert await generated_tokens(embedded_triton) > before
    await assert_generation_stops(embedded_triton, before)
