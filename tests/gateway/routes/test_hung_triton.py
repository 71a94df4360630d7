"""Issue 22 item 7: a Triton that hangs (a stopped process: no token, no probe answer) ends
every call waiting on it as soon as its readiness is lost, not at the silence limits (30 s
between tokens, 120 s to the first one): a 503 before the first byte, an error event after;
once it answers again, service resumes. (The real SIGSTOP is in tests/chaos.)"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from tests.fakes.app import AsgiCall, FakeGateway, chat, sse_payloads
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import Gateways

URL = "/v1/chat/completions"
PROBE_S = 0.05


async def lose_readiness(gateway: FakeGateway, fake: FakeTriton) -> None:
    """Hang the fake and probe until its readiness is lost (3 late probes in a row)."""
    fake.hung = True
    for _ in range(3):
        await gateway.runtime.readiness.probe(PROBE_S)
    assert not gateway.runtime.readiness.is_ready(fake.url, "ensemble")


async def regain_readiness(gateway: FakeGateway, fake: FakeTriton) -> None:
    fake.hung = False
    await gateway.runtime.readiness.probe(1.0)


async def test_every_call_waiting_on_a_hung_triton_ends_when_readiness_is_lost(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("default")  # the default limits: 30 s, 120 s
    fake.script.hang_after = 2
    streaming = [AsgiCall(gateway.app, URL, chat(stream=True, max_tokens=50)) for _ in range(2)]
    mid_stream = [asyncio.create_task(call.run()) for call in streaming]
    for call in streaming:
        await call.wait_chunks(2)  # two tokens: now it waits on a silent Triton
    fake.script.hang_after = 0  # these get no first token
    before_first = [AsgiCall(gateway.app, URL, chat(stream=True)),
                    AsgiCall(gateway.app, URL, chat(max_tokens=5))]  # fmt: skip
    waiting = [asyncio.create_task(call.run()) for call in before_first]
    while len(fake.requests) < 4:
        await asyncio.sleep(0.01)
    try:
        await lose_readiness(gateway, fake)
        lost_at = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*mid_stream, *waiting), 5)
        took = time.monotonic() - lost_at
        for call in streaming:
            payloads = sse_payloads(call.text)
            assert payloads[-1] == "[DONE]"
            assert payloads[-2]["error"]["code"] == "upstream_unavailable"
        for call in before_first:
            assert call.status == 503, call.text
            assert json.loads(call.text)["error"]["code"] == "upstream_unavailable"
        assert took < 2.0, took
        late = AsgiCall(gateway.app, URL, chat())  # accepted now: refused at once
        await asyncio.wait_for(late.run(), 2)
        assert late.status == 503
    finally:
        fake.script.hang_after = None
        await regain_readiness(gateway, fake)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=gateway.app), base_url="http://gateway"
    ) as http:
        assert (await http.post(URL, json=chat())).status_code == 200
