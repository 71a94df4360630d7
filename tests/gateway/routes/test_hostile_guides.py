"""Issue 22 items 1-4 through the routes: hostile guides are 400 ``invalid_guide`` naming the
limit and the field, before Triton sees anything; a guide that crashes the compiler or runs it
too long costs one sandboxed worker, never the gateway, and never the event loop."""

from __future__ import annotations

import asyncio
import json
import os
import time

import httpx

from tests.fakes.app import assert_openai_error, chat, http_client
from tests.fakes.triton import FakeTriton
from tests.gateway.guides.test_bounds import chain, wide
from tests.gateway.routes.gateways import Gateways

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
DEEP = {"name": "deep", "schema": json.loads(chain(2000))}


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}


async def test_the_2000_deep_defs_chain_is_refused_by_its_limit(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    reply = await http.post(CHAT, json=chat(model="fake-guided", response_format={
        "type": "json_schema", "json_schema": DEEP}))  # fmt: skip
    error = assert_openai_error(reply, 400, "invalid_guide")
    assert error["param"] == "response_format" and "max_ref_depth" in error["message"]
    tool = {"type": "function", "function": {"name": "f", "parameters": DEEP["schema"]}}
    forced = {"type": "function", "function": {"name": "f"}}
    reply = await http.post(CHAT, json=chat(model="fake-guided", tools=[tool], tool_choice=forced))
    error = assert_openai_error(reply, 400, "invalid_guide")
    assert error["param"] == "tools[0].function.parameters"
    assert not fake.requests


async def test_what_the_engine_would_refuse_is_refused_before_triton(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """The campaign's 10,000 properties got a 502 after 10-26 s of engine work; now a 400."""
    for schema, words in (
        (json.loads(wide(10_000)), "max_bytes"),
        (json.loads(wide(600)), "max_properties"),
        ({"anyOf": [json.loads(wide(300)) for _ in range(5)]}, "max is 2000"),
    ):
        body = {"model": "fake-guided", "prompt": "x", "guided_json": schema}
        error = assert_openai_error(await http.post(COMPLETIONS, json=body), 400, "invalid_guide")
        assert error["param"] == "guided_json" and words in error["message"]
    assert not fake.requests


async def test_error_bodies_are_bounded(gateways: Gateways, fake: FakeTriton) -> None:
    """A 1 MB invalid regex got a 4 MB 400 body; the message is now cut short."""
    gateway = await gateways.get("open_guides")
    async with http_client(gateway.app) as http:
        reply = await http.post(CHAT, json=chat(model="fake-guided", guided_regex="(" * 1_000_000))
    assert_openai_error(reply, 400, "invalid_guide")
    assert len(reply.content) < 2048


async def test_a_compiler_crash_is_a_400_and_the_gateway_goes_on(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("open_guides")
    sandbox = gateway.runtime.preparation.guides.sandbox
    async with http_client(gateway.app) as http:
        reply = await http.post(CHAT, json=chat(model="fake-guided", response_format={
            "type": "json_schema", "json_schema": DEEP}))  # fmt: skip
        error = assert_openai_error(reply, 400, "invalid_guide")
        assert "crashed the grammar compiler" in error["message"] and sandbox.crashed >= 1
        ok = await http.post(CHAT, json=chat(model="fake-guided", guided_regex="[0-9]+"))
    assert ok.status_code == 200, ok.text
    assert os.getpid() not in sandbox.pids


async def test_a_slow_compile_stalls_no_one_else(gateways: Gateways, fake: FakeTriton) -> None:
    """A grammar whose conversion takes seconds runs out of its 3 s budget in its worker,
    while a plain request on the same app is answered."""
    gateway = await gateways.get("open_guides")
    grammar = "\n".join(["root ::= r0", *(f'r{i} ::= "a" r{i + 1}' for i in range(6000)),
                         'r6000 ::= "b"'])  # fmt: skip
    async with http_client(gateway.app) as http:
        slow = asyncio.create_task(
            http.post(CHAT, json=chat(model="fake-guided", guided_grammar=grammar))
        )
        await asyncio.sleep(0.3)  # the compile is under way
        started = time.monotonic()
        plain = await http.post(CHAT, json=chat())
        answered_in = time.monotonic() - started
        assert plain.status_code == 200 and not slow.done()
        error = assert_openai_error(await slow, 400, "invalid_guide")
    assert "compile_timeout_s" in error["message"] and answered_in < 1.0
