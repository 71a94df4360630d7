"""Background responses through the OpenAI SDK unchanged (in process, over the fake Triton):
create answers at once and the run outlives the request; retrieve polls it; cancel stops the
Triton work on the gateway that runs it, and from another gateway sharing the store; the
per-process bound; a process that stops records its runs failed; one that died is not shown
in progress for ever."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from gateway.routes import background
from tests.fakes.app import FakeGateway, http_client, start_gateway
from tests.fakes.triton import FakeTriton
from tests.gateway.store.engines import record

ASK: dict[str, Any] = {"model": "fake-llava", "input": "Tell me a long story."}


@pytest.fixture
def slow(session_fake: FakeTriton) -> FakeTriton:
    session_fake.reset()
    session_fake.script.tokens = tuple(f" w{i}" for i in range(400))
    session_fake.script.delay_s = 0.02  # 8 s in all: a run to cancel
    return session_fake


@pytest.fixture
async def pair(slow: FakeTriton, tmp_path: Path) -> AsyncIterator[tuple[FakeGateway, FakeGateway]]:
    """Two gateways sharing one store (as two pods would)."""
    shared = {"store_path": tmp_path / "responses.sqlite3", "max_background": 2}
    first = await start_gateway(slow, responses=shared)
    second = await start_gateway(slow, responses=shared)
    yield first, second
    await first.aclose()
    await second.aclose()


@pytest.fixture
async def clients(pair: tuple[FakeGateway, FakeGateway]) -> AsyncIterator[list[AsyncOpenAI]]:
    async with http_client(pair[0].app) as one, http_client(pair[1].app) as two:
        yield [AsyncOpenAI(base_url="http://gateway/v1", api_key="k", http_client=h,
                           max_retries=0) for h in (one, two)]  # fmt: skip


def foreground_id(response: Any) -> str:
    return str(response.id)


async def until(client: AsyncOpenAI, response_id: str, *statuses: str) -> Any:
    for _ in range(400):
        found = await client.responses.retrieve(response_id)
        if found.status in statuses:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{response_id} never reached {statuses}: {found.status}")


async def test_a_background_response_runs_detached_and_is_polled(
    clients: list[AsyncOpenAI], slow: FakeTriton
) -> None:
    slow.script.tokens = tuple(f" w{i}" for i in range(150))
    started = time.monotonic()
    made = await clients[0].responses.create(**ASK, background=True)
    assert made.status == "queued" and made.background is True
    assert time.monotonic() - started < 2.5  # answered well before the 3 s of generation
    done = await until(clients[1], made.id, "completed")  # seen from the other gateway
    assert done.background is True and done.output_text == "".join(slow.script.tokens)
    assert done.usage is not None and done.usage.output_tokens == 150


async def test_cancel_on_the_running_gateway_stops_triton_at_once(
    clients: list[AsyncOpenAI], slow: FakeTriton
) -> None:
    made = await clients[0].responses.create(**ASK, background=True)
    await until(clients[0], made.id, "in_progress")
    cancelled = await clients[0].responses.cancel(made.id)
    assert cancelled.status == "cancelled"
    (request_id,) = [r.request_id for r in slow.requests]
    assert await slow.wait_cancelled(request_id, timeout=2)
    await asyncio.sleep(0.3)
    assert (await clients[1].responses.retrieve(made.id)).status == "cancelled"  # it stays


async def test_cancel_on_another_gateway_reaches_the_run(
    clients: list[AsyncOpenAI], slow: FakeTriton
) -> None:
    made = await clients[0].responses.create(**ASK, background=True)
    await until(clients[1], made.id, "in_progress")
    cancelled = await clients[1].responses.cancel(made.id)  # not where it runs
    assert cancelled.status == "cancelled"
    (request_id,) = [r.request_id for r in slow.requests]
    assert await slow.wait_cancelled(request_id, timeout=background.WATCH_S * 2 + 3)
    again = await clients[0].responses.cancel(made.id)  # idempotent
    assert again.status == "cancelled"


async def test_what_background_cannot_do_is_refused(
    clients: list[AsyncOpenAI], pair: tuple[FakeGateway, FakeGateway], slow: FakeTriton
) -> None:
    with pytest.raises(openai.BadRequestError, match="store"):
        await clients[0].responses.create(**ASK, background=True, store=False)
    with pytest.raises(openai.BadRequestError, match="background"):  # nothing to replay
        await clients[0].responses.retrieve(
            foreground_id(await clients[0].responses.create(**ASK, max_output_tokens=1)),
            stream=True,
        )
    foreground = await clients[0].responses.create(**ASK, max_output_tokens=2)
    with pytest.raises(openai.BadRequestError, match="only background"):
        await clients[0].responses.cancel(foreground.id)
    with pytest.raises(openai.NotFoundError):
        await clients[0].responses.cancel("resp_missing")
    runs = [await clients[0].responses.create(**ASK, background=True) for _ in range(2)]
    with pytest.raises(openai.RateLimitError):  # max_background: 2 per process
        await clients[0].responses.create(**ASK, background=True)
    third = await clients[1].responses.create(**ASK, background=True)  # the other has room
    for run in [*runs, third]:
        await clients[0].responses.cancel(run.id)


async def test_a_stopping_gateway_records_its_runs_failed(slow: FakeTriton, tmp_path: Path) -> None:
    settings = {"store_path": tmp_path / "r.sqlite3"}
    gateway = await start_gateway(slow, responses=settings, server={"drain_timeout_s": 0.2})
    async with http_client(gateway.app) as http:
        made = (await http.post("/v1/responses", json={**ASK, "background": True})).json()
        for _ in range(100):
            if (await http.get(f"/v1/responses/{made['id']}")).json()["status"] == "in_progress":
                break
            await asyncio.sleep(0.05)
    await gateway.aclose()
    after = await start_gateway(slow, responses=settings)
    try:
        async with http_client(after.app) as http:
            seen = (await http.get(f"/v1/responses/{made['id']}")).json()
        assert seen["status"] == "failed" and "stopped" in seen["error"]["message"]
    finally:
        await after.aclose()


async def test_a_run_whose_process_died_is_not_in_progress_for_ever(
    pair: tuple[FakeGateway, FakeGateway],
) -> None:
    store = pair[0].runtime.store
    old = record("resp_orphan")
    orphan = replace(
        old, created_at=time.time() - 10_000,
        response={**old.response, "status": "in_progress", "background": True},
    )  # fmt: skip
    await store.put(orphan)
    async with http_client(pair[1].app) as http:
        seen: httpx.Response = await http.get("/v1/responses/resp_orphan")
    assert seen.json()["status"] == "failed"
