"""A graceful stop ends every request well-formed: streams with ``server_shutting_down`` in
their endpoint's own way (chat: an error and ``[DONE]``; Responses: ``response.failed``),
requests that had not started answering with 503 and ``Retry-After``, new requests refused at
once; the Triton calls of the ended requests are cancelled. In-process, over the fake Triton
(``Drain.begin`` is what the server calls on SIGTERM)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.fakes.app import (
    AsgiCall,
    FakeGateway,
    assert_openai_error,
    chat,
    http_client,
    sse_payloads,
    start_gateway,
)
from tests.fakes.triton import FakeTriton

URL = "/v1/chat/completions"


@pytest.fixture
async def stopping() -> AsyncIterator[tuple[FakeGateway, FakeTriton]]:
    fake = FakeTriton()
    gateway = await start_gateway(fake)
    try:
        yield gateway, fake
    finally:
        await gateway.aclose()


async def test_a_drain_ends_every_request_well_formed(
    stopping: tuple[FakeGateway, FakeTriton],
) -> None:
    gateway, fake = stopping
    fake.script.hang_after = 1  # streams that would never end by themselves
    streams = [AsgiCall(gateway.app, URL, chat(stream=True), {"X-Request-Id": f"s{i}"})
               for i in range(3)]  # fmt: skip
    unstarted = AsgiCall(gateway.app, URL, chat(), {"X-Request-Id": "json"})  # still waiting
    tasks = [asyncio.create_task(c.run()) for c in [*streams, unstarted]]
    for call in streams:
        await call.wait_chunks(1)
    await fake.wait_started("json")
    started = time.monotonic()
    gateway.app.state.drain.begin(grace_s=1.5)  # requests are ended 1 s before the deadline
    async with http_client(gateway.app) as http:
        refused = await http.post(URL, json=chat())
    assert_openai_error(refused, 503, "server_shutting_down")
    assert refused.headers["retry-after"] == "1"
    await asyncio.wait_for(asyncio.gather(*tasks), 3.0)
    assert 0.4 < time.monotonic() - started < 1.5
    for call in streams:
        events = sse_payloads(call.text)
        assert call.status == 200 and call.finished
        assert events[-1] == "[DONE]"
        assert events[-2]["error"]["code"] == "server_shutting_down"
    assert unstarted.status == 503 and unstarted.finished
    assert unstarted.headers["retry-after"] == "1"
    assert '"server_shutting_down"' in unstarted.text
    for request_id in ("s0", "s1", "s2", "json"):
        assert await fake.wait_cancelled(request_id)


async def test_requests_that_finish_in_time_are_untouched(
    stopping: tuple[FakeGateway, FakeTriton],
) -> None:
    gateway, fake = stopping
    fake.script.delay_s = 0.05
    call = AsgiCall(gateway.app, URL, chat(stream=True), {"X-Request-Id": "quick"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(1)
    gateway.app.state.drain.begin(grace_s=5.0)
    await asyncio.wait_for(task, 3.0)
    events = sse_payloads(call.text)
    assert events[-1] == "[DONE]" and not any("error" in e for e in events if isinstance(e, dict))
    assert fake.cancelled == []


def _response_events(text: str) -> list[dict[str, Any]]:
    """The ``data:`` payloads of a Responses stream (``event:`` and ``data:`` lines)."""
    return [json.loads(block.split("\ndata: ", 1)[1]) for block in text.split("\n\n") if block]


async def test_a_responses_stream_ends_with_response_failed_and_no_done(
    stopping: tuple[FakeGateway, FakeTriton],
) -> None:
    """The Responses stream has no ``[DONE]``: a drain ends it with its own failure event."""
    gateway, fake = stopping
    fake.script.hang_after = 1
    body = {"model": "fake-llava", "input": "Hello?", "stream": True}
    call = AsgiCall(gateway.app, "/v1/responses", body, {"X-Request-Id": "resp"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(1)
    gateway.app.state.drain.begin(grace_s=1.2)
    await asyncio.wait_for(task, 3.0)
    assert call.status == 200 and call.finished
    assert "[DONE]" not in call.text
    events = _response_events(call.text)
    last = events[-1]
    assert last["type"] == "response.failed"
    assert "server_shutting_down" in last["response"]["error"]["message"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert await fake.wait_cancelled("resp")


async def test_several_choices_end_with_the_error_and_done(
    stopping: tuple[FakeGateway, FakeTriton],
) -> None:
    """``n`` > 1: the choices run in tasks of their own; the drain still reaches the stream."""
    gateway, fake = stopping
    fake.script.hang_after = 1
    call = AsgiCall(gateway.app, URL, chat(stream=True, n=2), {"X-Request-Id": "many"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(1)
    gateway.app.state.drain.begin(grace_s=1.2)
    await asyncio.wait_for(task, 3.0)
    events = sse_payloads(call.text)
    assert call.status == 200 and call.finished
    assert events[-1] == "[DONE]"
    assert events[-2]["error"]["code"] == "server_shutting_down"
