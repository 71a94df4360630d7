"""Streamed background responses over real sockets (two launcher processes over the fake
Triton, sharing one SQLite store, as two pods share a store): the client that created one
leaves mid-stream, the run goes on, and another client resumes it on the other gateway with
``starting_after``; a cancel ends every stream that follows it. Through the OpenAI SDK
unchanged. (In process, httpx's ASGI transport hands over a body only once it is whole, so
leaving mid-stream needs a real server.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.chaos.clients import launch

TOKENS = [f" w{i}" for i in range(150)]
ASK: dict[str, Any] = {"model": "fake-llava", "input": "Tell me a long story."}


@pytest.fixture(scope="module")
async def pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[list[AsyncOpenAI]]:
    store = tmp_path_factory.mktemp("store") / "responses.sqlite3"
    sections = {"responses": {"store_path": str(store)},
                "script": {"tokens": TOKENS, "delay_s": 0.02}}  # fmt: skip
    async with launch({}, sections=sections) as one, launch({}, sections=sections) as two:
        yield [AsyncOpenAI(base_url=f"{g.url}/v1", api_key="k", max_retries=0, timeout=60)
               for g in (one, two)]  # fmt: skip


async def test_a_streamed_background_response_resumes_on_another_gateway(
    pair: list[AsyncOpenAI],
) -> None:
    """The two parts join into the whole answer, every sequence number once, in order."""
    first: list[Any] = []
    stream = await pair[0].responses.create(**ASK, background=True, stream=True)
    async for event in stream:
        first.append(event)
        if len(first) == 12:
            break  # the client leaves mid-stream
    await stream.close()
    response_id = first[0].response.id
    assert first[0].type == "response.created" and first[0].response.background is True
    resumed = await pair[1].responses.retrieve(
        response_id, stream=True, starting_after=first[-1].sequence_number
    )
    rest = [event async for event in resumed]
    numbers = [e.sequence_number for e in first + rest]
    assert numbers == list(range(len(numbers)))
    assert rest[-1].type == "response.completed"
    deltas = "".join(e.delta for e in first + rest if e.type == "response.output_text.delta")
    assert deltas == "".join(TOKENS) == rest[-1].response.output_text
    again = [e async for e in await pair[0].responses.retrieve(response_id, stream=True)]
    assert [e.sequence_number for e in again] == numbers  # the whole stream, replayed


async def test_a_cancel_ends_the_streams_that_follow_it(pair: list[AsyncOpenAI]) -> None:
    stream = await pair[0].responses.create(**ASK, background=True, stream=True)
    created = await anext(aiter(stream))
    response_id = created.response.id

    async def read(events: Any) -> list[Any]:
        return [event async for event in events]

    followers = [
        asyncio.create_task(read(stream)),
        asyncio.create_task(read(await pair[1].responses.retrieve(response_id, stream=True))),
    ]
    await asyncio.sleep(0.5)
    assert (await pair[1].responses.cancel(response_id)).status == "cancelled"
    for events in await asyncio.wait_for(asyncio.gather(*followers), 15):  # none hangs
        assert events and events[-1].type != "response.completed"
    assert (await pair[0].responses.retrieve(response_id)).status == "cancelled"
