"""A Triton that goes silent (hung, stopped, a dead connection) ends every request within the
upstream timeouts: 504 ``upstream_timeout`` before the first byte, an error event and
``[DONE]`` once streaming; its Triton request is cancelled; a Triton that fails its readiness
probe gets new requests refused at once with 503 and ``Retry-After``."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.triton.readiness import TIMEOUTS_TO_FAIL
from tests.fakes.app import AsgiCall, assert_openai_error, chat, http_client, sse_payloads
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import Gateways

URL = "/v1/chat/completions"


async def test_no_first_token_is_a_504_within_the_timeout(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("impatient")
    fake.script.hang_after = 0
    started = time.monotonic()
    async with http_client(gateway.app) as http:
        response = await http.post(URL, json=chat(), headers={"X-Request-Id": "silent-0"})
    elapsed = time.monotonic() - started
    error = assert_openai_error(response, 504, "upstream_timeout")
    assert "first token" in error["message"]
    assert 0.35 < elapsed < 2.0, elapsed
    assert await fake.wait_cancelled("silent-0")


async def test_silence_mid_stream_ends_with_an_error_event_and_done(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("impatient")
    fake.script.hang_after = 2
    call = AsgiCall(gateway.app, URL, chat(stream=True), {"X-Request-Id": "silent-2"})
    started = time.monotonic()
    await asyncio.wait_for(call.run(), 3.0)
    assert time.monotonic() - started < 2.0
    assert call.status == 200 and call.finished
    events = sse_payloads(call.text)
    assert events[-1] == "[DONE]"
    assert events[-2]["error"]["code"] == "upstream_timeout"
    assert "between tokens" in events[-2]["error"]["message"]
    tokens = [e["choices"][0]["delta"].get("content") for e in events[:-2] if e.get("choices")]
    assert "".join(t or "" for t in tokens) == "".join(fake.script.tokens[:2])
    assert await fake.wait_cancelled("silent-2")


async def test_a_slow_but_steady_stream_is_not_cut(gateways: Gateways, fake: FakeTriton) -> None:
    """Only silence counts: tokens 0.2 s apart for longer than the 0.4 s gap limit in total."""
    gateway = await gateways.get("impatient")
    fake.script.tokens = tuple(f" t{i}" for i in range(6))
    fake.script.delay_s = 0.2
    async with http_client(gateway.app) as http:
        response = await http.post(URL, json=chat(max_tokens=6))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == " t0 t1 t2 t3 t4 t5"


async def test_a_client_leaving_is_still_a_cancellation_not_a_timeout(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("impatient")
    fake.script.hang_after = 1
    call = AsgiCall(gateway.app, URL, chat(stream=True), {"X-Request-Id": "left-1"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(1)
    call.disconnect()
    await asyncio.wait_for(task, 2.0)
    assert await fake.wait_cancelled("left-1")
    assert "upstream_timeout" not in call.text


async def test_a_triton_failing_its_readiness_probe_gets_new_requests_refused_at_once(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("impatient")
    runtime = gateway.runtime
    fake.down = True
    try:
        await runtime.readiness.probe(timeout_s=1.0)
        async with http_client(gateway.app) as http:
            started = time.monotonic()
            response = await http.post(URL, json=chat())
            assert time.monotonic() - started < 0.5
            assert_openai_error(response, 503, "upstream_unavailable")
            assert response.headers["retry-after"] == "1"
            fake.down = False
            await runtime.readiness.probe(timeout_s=1.0)
            assert (await http.post(URL, json=chat())).status_code == 200
    finally:
        fake.down = False
        await runtime.readiness.probe(timeout_s=1.0)
    assert len(fake.requests) == 1  # the refused request never reached Triton


async def test_a_probe_that_hangs_counts_as_not_ready(
    gateways: Gateways, fake: FakeTriton, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = await gateways.get("impatient")

    async def never(model_names: object = ()) -> bool:
        await asyncio.sleep(3600)
        return True

    monkeypatch.setattr(fake, "is_ready", never)
    started = time.monotonic()
    # A late probe may be a busy Triton: only TIMEOUTS_TO_FAIL late ones in a row refuse.
    for _ in range(TIMEOUTS_TO_FAIL - 1):
        await gateway.runtime.readiness.probe(timeout_s=0.2)
        assert all(gateway.runtime.readiness.ready.values())
    await gateway.runtime.readiness.probe(timeout_s=0.2)
    assert time.monotonic() - started < 0.2 * TIMEOUTS_TO_FAIL + 1.0
    assert not all(gateway.runtime.readiness.ready.values())
    monkeypatch.undo()
    await gateway.runtime.readiness.probe(timeout_s=1.0)
    assert all(gateway.runtime.readiness.ready.values())


async def test_one_model_failing_its_probe_leaves_the_others_of_its_triton_served(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("impatient")
    fake.unready.add("ensemble_onevision")
    try:
        await gateway.runtime.readiness.probe(timeout_s=1.0)
        async with http_client(gateway.app) as http:
            refused = await http.post(URL, json=chat(model="fake-onevision"))
            assert_openai_error(refused, 503, "upstream_unavailable")
            assert (await http.post(URL, json=chat())).status_code == 200
    finally:
        fake.unready.discard("ensemble_onevision")
        await gateway.runtime.readiness.probe(timeout_s=1.0)
