"""Slow and stuck request bodies: 408 within the body deadlines, no in-flight slot held while
a body is still coming, the slot given back on every path, and every refusal counted under the
endpoint it was for.

Driven straight through ASGI: ``Trickle`` hands the app its body in parts, when the test says.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.fakes.app import AsgiCall, FakeGateway, chat, http_client, start_gateway
from tests.fakes.triton import FakeTriton
from tests.gateway.observability.test_metrics import samples

URL = "/v1/chat/completions"
TOTAL_S, IDLE_S = 1.0, 0.3  # the gateway's body deadlines here


class Trickle(AsgiCall):
    """An ``AsgiCall`` whose body arrives in the parts ``give`` is called with."""

    def __init__(self, app: Any, body: bytes = json.dumps(chat()).encode()) -> None:
        super().__init__(app, URL, body)
        self.parts: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def give(self, data: bytes, more: bool = True) -> None:
        self.parts.put_nowait({"type": "http.request", "body": data, "more_body": more})

    def leave(self) -> None:
        self.parts.put_nowait({"type": "http.disconnect"})

    def start(self) -> asyncio.Task[AsgiCall]:
        return asyncio.create_task(self.run())

    @property
    def error(self) -> dict[str, Any]:
        body = json.loads(self.text)
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
        return dict(body["error"])

    async def _receive(self) -> dict[str, Any]:
        return await self.parts.get()


@pytest.fixture(scope="module")
async def slow(session_fake: FakeTriton) -> AsyncIterator[FakeGateway]:
    server = {"max_in_flight": 1, "body_timeout_s": TOTAL_S, "body_idle_timeout_s": IDLE_S}
    gateway = await start_gateway(session_fake, server=server)
    yield gateway
    await gateway.aclose()


def counted(gateway: FakeGateway, endpoint: str, status: int, code: str) -> float:
    key = (("code", code), ("endpoint", endpoint), ("model", ""), ("status", str(status)))
    return samples(gateway.runtime.metrics).get(("mmgw_requests_total", key), 0.0)


def in_flight(gateway: FakeGateway) -> float:
    return samples(gateway.runtime.metrics)[("mmgw_in_flight_requests", ())]


async def test_a_body_that_stops_is_a_408_after_the_idle_wait(
    slow: FakeGateway, fake: FakeTriton
) -> None:
    before = counted(slow, URL, 408, "request_timeout")
    call = Trickle(slow.app)
    began = time.monotonic()
    call.give(call.body[:1])
    await asyncio.wait_for(call.start(), 5)
    assert IDLE_S <= time.monotonic() - began < IDLE_S + 0.5
    assert call.status == 408 and call.headers["connection"] == "close"
    assert call.error["code"] == "request_timeout" and call.error["type"] == "invalid_request_error"
    assert "0.3 s" in call.error["message"]
    assert fake.requests == [] and in_flight(slow) == 0
    assert counted(slow, URL, 408, "request_timeout") == before + 1


async def test_a_body_that_trickles_is_a_408_at_the_total_deadline(
    slow: FakeGateway, fake: FakeTriton
) -> None:
    call = Trickle(slow.app)
    task = call.start()
    began = time.monotonic()
    for byte in call.body:
        if task.done():
            break
        call.give(bytes([byte]))
        await asyncio.sleep(IDLE_S / 3)
    await asyncio.wait_for(task, 5)
    assert TOTAL_S <= time.monotonic() - began < TOTAL_S + 0.5
    assert call.status == 408 and call.error["code"] == "request_timeout"
    assert "did not arrive in time" in call.error["message"]
    assert fake.requests == []


async def test_stuck_bodies_hold_no_slot(slow: FakeGateway, fake: FakeTriton) -> None:
    """With one slot, three stuck uploads leave it free for a real request."""
    stuck = [Trickle(slow.app) for _ in range(3)]
    tasks = [call.start() for call in stuck]
    for call in stuck:
        call.give(call.body[:5])
    async with http_client(slow.app) as http:
        for _ in range(2):
            assert (await http.post(URL, json=chat())).status_code == 200
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert [call.status for call in stuck] == [408, 408, 408]
    assert in_flight(slow) == 0


async def test_the_cap_applies_once_the_body_is_in_and_counts_under_the_endpoint(
    slow: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 1
    holder = AsgiCall(slow.app, URL, chat(stream=True), {"X-Request-Id": "holder"})
    task = asyncio.create_task(holder.run())
    await holder.wait_chunks(1)
    assert in_flight(slow) == 1
    before = counted(slow, URL, 429, "rate_limit_exceeded")
    models_before = counted(slow, "/v1/models", 429, "rate_limit_exceeded")
    refused = Trickle(slow.app)
    refused_task = refused.start()
    refused.give(refused.body[:10])
    await asyncio.sleep(0.05)
    assert not refused_task.done()  # still receiving: no slot asked for yet
    refused.give(refused.body[10:], more=False)
    await asyncio.wait_for(refused_task, 5)
    assert refused.status == 429 and refused.headers["retry-after"] == "1"
    assert refused.error["code"] == "rate_limit_exceeded"
    async with http_client(slow.app) as http:
        listed = await http.get("/v1/models")  # no body: refused on arrival, before routing
    assert listed.status_code == 429 and listed.headers["retry-after"] == "1"
    assert counted(slow, URL, 429, "rate_limit_exceeded") == before + 1
    assert counted(slow, "/v1/models", 429, "rate_limit_exceeded") == models_before + 1
    holder.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("holder")
    assert in_flight(slow) == 0


async def test_a_client_gone_mid_body_is_a_quiet_cancelled_499(
    slow: FakeGateway, fake: FakeTriton, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = counted(slow, URL, 499, "cancelled")
    call = Trickle(slow.app)
    call.give(call.body[:5])
    call.leave()
    await asyncio.wait_for(call.start(), 5)
    assert call.status == 499
    assert counted(slow, URL, 499, "cancelled") == before + 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert fake.requests == [] and in_flight(slow) == 0


async def test_a_request_cancelled_mid_body_or_mid_answer_gives_its_slot_back(
    slow: FakeGateway, fake: FakeTriton
) -> None:
    call = Trickle(slow.app)
    task = call.start()
    call.give(call.body[:5])
    await asyncio.sleep(0.05)
    task.cancel()
    fake.script.hang_after = 1
    holder = AsgiCall(slow.app, URL, chat(stream=True), {"X-Request-Id": "cancelled"})
    holding = asyncio.create_task(holder.run())
    await holder.wait_chunks(1)
    assert in_flight(slow) == 1
    holding.cancel()  # a server shutting down cancels its requests
    await asyncio.gather(task, holding, return_exceptions=True)
    assert in_flight(slow) == 0
    fake.script.hang_after = None
    async with http_client(slow.app) as http:
        assert (await http.post(URL, json=chat())).status_code == 200


async def test_a_whole_body_at_once_is_served_as_before(
    slow: FakeGateway, fake: FakeTriton
) -> None:
    call = Trickle(slow.app)
    call.give(call.body, more=False)
    await asyncio.wait_for(call.start(), 5)
    assert call.status == 200 and "fake engine" in call.text
    assert in_flight(slow) == 0


@pytest.fixture(scope="module")
async def rated(session_fake: FakeTriton) -> AsyncIterator[FakeGateway]:
    """A minimum body rate of 200 bytes/s after a 0.5 s grace; long total and idle limits."""
    server = {"body_timeout_s": 60.0, "body_idle_timeout_s": 15.0,
              "body_min_rate_bytes_s": 200.0, "body_min_rate_grace_s": 0.5}  # fmt: skip
    gateway = await start_gateway(session_fake, server=server)
    yield gateway
    await gateway.aclose()


async def test_a_body_below_the_minimum_rate_is_a_408_after_the_grace(
    rated: FakeGateway, fake: FakeTriton
) -> None:
    """Issue 22 item 8: a byte every 50 ms (20 bytes/s) stayed open for the whole 60 s; with
    the minimum rate it is closed soon after the grace, well before either limit."""
    call = Trickle(rated.app, json.dumps(chat("x" * 2000)).encode())
    task = call.start()
    began = time.monotonic()
    for byte in call.body:
        if task.done():
            break
        call.give(bytes([byte]))
        await asyncio.sleep(0.05)
    await asyncio.wait_for(task, 10)
    assert 0.5 <= time.monotonic() - began < 3.0
    assert call.status == 408 and call.headers["connection"] == "close"
    assert "slower than 200 bytes/s" in call.error["message"]
    assert fake.requests == []


async def test_a_slow_but_steady_body_is_served(rated: FakeGateway, fake: FakeTriton) -> None:
    """A slow link (about 2 KB/s, ten times the minimum) with a pause is never refused."""
    call = Trickle(rated.app, json.dumps(chat("x" * 4000)).encode())
    task = call.start()
    parts = [call.body[i : i + 100] for i in range(0, len(call.body), 100)]
    for index, part in enumerate(parts):
        call.give(part, more=index < len(parts) - 1)
        await asyncio.sleep(0.4 if index == 10 else 0.05)  # a stall mid-upload
    await asyncio.wait_for(task, 10)
    assert call.status == 200, call.text
