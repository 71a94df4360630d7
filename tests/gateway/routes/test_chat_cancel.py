"""A client that leaves cancels its Triton request, streamed or not; the in-flight cap answers
429 while the slots are taken and frees a slot when its client leaves.

Driven straight through ASGI (``AsgiCall``): httpx's transport cannot leave early."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from tests.fakes.app import AsgiCall, FakeGateway, assert_openai_error, chat, http_client
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import API_KEY, Gateways

URL = "/v1/chat/completions"


async def test_leaving_mid_stream_cancels_the_triton_request(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 2
    call = AsgiCall(gateway.app, URL, chat(stream=True), {"X-Request-Id": "gone-1"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(2)  # role + first token, then the second token
    assert fake.cancelled == []
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("gone-1")
    assert call.status == 200 and not call.finished
    assert "[DONE]" not in call.text and fake.script.tokens[1] in call.text


async def test_leaving_a_stream_before_its_first_token_cancels_the_triton_request(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 0
    call = AsgiCall(gateway.app, URL, chat(stream=True), {"X-Request-Id": "gone-0"})
    task = asyncio.create_task(call.run())
    await fake.wait_started("gone-0")
    call.disconnect()
    try:
        assert await fake.wait_cancelled("gone-0", timeout=0.5)
    finally:
        task.cancel()  # what the gateway should have done itself
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_leaving_a_steady_stream_stops_it_early(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.tokens = tuple(f" t{i}" for i in range(200))
    fake.script.delay_s = 0.005
    call = AsgiCall(gateway.app, URL, chat(stream=True, max_tokens=200), {"X-Request-Id": "gone-2"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(3)
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("gone-2")
    assert " t199" not in call.text


async def test_leaving_a_json_request_cancels_the_triton_request(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 1
    call = AsgiCall(gateway.app, URL, chat(), {"X-Request-Id": "gone-3"})
    task = asyncio.create_task(call.run())
    await fake.wait_started("gone-3")
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("gone-3")
    assert call.status == 499  # nobody hears it; the access log and metrics do


async def test_a_client_that_stays_cancels_nothing(gateway: FakeGateway, fake: FakeTriton) -> None:
    fake.script.delay_s = 0.002
    for stream in (True, False):
        call = await AsgiCall(gateway.app, URL, chat(stream=stream)).run()
        assert call.status == 200 and call.finished
    assert len(fake.requests) == 2 and fake.cancelled == []


@pytest.fixture
async def guarded(gateways: Gateways, fake: FakeTriton) -> FakeGateway:
    return await gateways.get("guarded")


async def test_over_the_in_flight_cap_is_a_429_until_a_slot_frees(
    guarded: FakeGateway, fake: FakeTriton
) -> None:
    limit = guarded.runtime.settings.server.max_in_flight
    assert limit == 1
    auth = {"Authorization": f"Bearer {API_KEY}"}
    fake.script.hang_after = 1
    first = AsgiCall(guarded.app, URL, chat(stream=True), {**auth, "X-Request-Id": "slot-1"})
    task = asyncio.create_task(first.run())
    await first.wait_chunks(1)
    async with http_client(guarded.app, headers=auth) as http:
        refused = await http.post(URL, json=chat())
        error = assert_openai_error(refused, 429, "rate_limit_exceeded")
        assert error["type"] == "rate_limit_error" and str(limit) in error["message"]
        assert refused.headers["retry-after"] == "1"
        assert (await http.get("/health")).status_code == 200  # only /v1/ is capped
        first.disconnect()
        await asyncio.wait_for(task, 5)
        assert await fake.wait_cancelled("slot-1")
        fake.script.hang_after = None
        assert (await http.post(URL, json=chat())).status_code == 200
    assert len(fake.requests) == 2  # the refused one never reached Triton


async def test_a_refused_request_does_not_hold_a_slot(
    guarded: FakeGateway, fake: FakeTriton
) -> None:
    async with http_client(guarded.app, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        for _ in range(3):
            assert (await http.post(URL, json=chat(model="nope"))).status_code == 404
        assert (await http.post(URL, json=chat())).status_code == 200


async def test_an_unauthorised_request_is_refused_before_the_cap(
    guarded: FakeGateway, fake: FakeTriton
) -> None:
    async with http_client(guarded.app) as http:
        response = await http.post(URL, json=chat())
    assert_openai_error(response, 401, "invalid_api_key")
    assert fake.requests == []


async def test_the_cap_counts_whole_streams(guarded: FakeGateway, fake: FakeTriton) -> None:
    """A stream holds its slot until its last byte, not just until its headers."""
    fake.script.tokens = ("a", "b", "c")
    fake.script.hang_after = 2
    auth = {"Authorization": f"Bearer {API_KEY}"}
    call = AsgiCall(guarded.app, URL, chat(stream=True), {**auth, "X-Request-Id": "slot-2"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(2)
    async with http_client(guarded.app, headers=auth) as http:
        assert (await http.post(URL, json=chat())).status_code == 429
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("slot-2")
    fake.script.hang_after = None
    async with http_client(guarded.app, headers=auth) as http:
        assert (await http.post(URL, json=chat())).status_code == 200


@pytest.fixture
async def silent_media_server() -> AsyncIterator[tuple[str, list[asyncio.Event]]]:
    """A loopback HTTP server that reads the request and never answers; each connection's
    event is set when the gateway hangs up."""
    connections: list[asyncio.Event] = []
    writers: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hung_up = asyncio.Event()
        connections.append(hung_up)
        writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        await reader.read()  # b"" once the gateway closes its side
        hung_up.set()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/slow.png", connections
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_leaving_while_media_is_fetched_cancels_the_fetch(
    gateways: Gateways,
    fake: FakeTriton,
    silent_media_server: tuple[str, list[asyncio.Event]],
    stream: bool,
) -> None:
    """The client is watched from arrival: a fetch that hangs is abandoned when it leaves, and
    nothing reaches Triton."""
    gateway = await gateways.get("loopback")
    url, connections = silent_media_server
    body = chat(stream=stream, content=[
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": url}},
    ])  # fmt: skip
    call = AsgiCall(gateway.app, URL, body, {"X-Request-Id": f"fetching-{stream}"})
    task = asyncio.create_task(call.run())
    for _ in range(200):  # the gateway has connected to the media server
        if connections:
            break
        await asyncio.sleep(0.01)
    assert connections, "the gateway never fetched the image"
    call.disconnect()
    await asyncio.wait_for(task, 2.0)  # the handler ended: nothing waits on the fetch
    assert call.status == 499 and not fake.requests
    await asyncio.wait_for(connections[0].wait(), 2.0)  # the fetch itself was abandoned
