"""The OpenAI Agents SDK, unchanged, runs a multi-turn agent with a function tool against two
gateways behind a round-robin proxy (each request on a new connection, so consecutive model
calls of one run land on alternate gateways), sharing one real PostgreSQL store, in front of
the session's real Triton: every turn continues the previous one by ``previous_response_id``
on whichever gateway it reaches, and no turn fails."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import pytest
from openai import AsyncOpenAI

from gateway.config import ResponsesSettings
from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.conftest import e2e_settings
from tests.live_gateway import serving
from tests.postgres import PostgresServer

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK (openai-agents) is absent")
pytestmark = pytest.mark.e2e


@pytest.fixture
async def round_robin(
    embedded_triton: EmbeddedTriton, postgres_server: PostgresServer
) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback TCP proxy over two gateways: each new connection goes to the next one."""
    store = ResponsesSettings(store_url=await postgres_server.new_database())
    settings = e2e_settings(embedded_triton).model_copy(update={"responses": store})
    async with serving(settings) as first, serving(settings) as second:
        ports = [int(url.rsplit(":", 1)[1]) for url in (first, second)]
        turn = itertools.cycle(range(2))
        served = [0, 0]

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while chunk := await reader.read(65536):
                    writer.write(chunk)
                    await writer.drain()
            finally:
                writer.close()

        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            index = next(turn)
            served[index] += 1
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", ports[index])
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        proxy = await asyncio.start_server(forward, "127.0.0.1", 0)
        port = proxy.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}", served
        finally:
            proxy.close()


async def test_an_agent_with_a_tool_runs_many_turns_across_two_gateways(
    round_robin: tuple[str, list[int]],
) -> None:
    """Each turn: the model is made to call the tool (a forced call: guided, so it always
    ends); the agent runs it and stops on its result; the next turn sends that result and a
    new question with ``previous_response_id``, so the conversation lives in the shared store
    and every turn may land on the other gateway."""
    url, served = round_robin
    agents.set_tracing_disabled(True)
    asked: list[str] = []

    @agents.function_tool
    def get_weather(city: Literal["Paris", "Oslo"]) -> str:
        """The weather in a city."""
        asked.append(city)
        return f"It is sunny in {city}."

    fresh = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0), timeout=180)
    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", http_client=fresh)
    agent = agents.Agent(
        name="weather",
        instructions="Call get_weather for the city asked about.",
        tools=[get_weather],
        tool_use_behavior="stop_on_first_tool",
        model=agents.OpenAIResponsesModel(model="reference-llava", openai_client=client),
        model_settings=agents.ModelSettings(tool_choice="get_weather", temperature=0),
    )
    previous: str | None = None
    results: list[Any] = []
    for question in ("Weather in Paris?", "And in Oslo?", "And tomorrow?", "And then?"):
        turn = [*results, {"role": "user", "content": question}]
        result = await agents.Runner.run(agent, turn, previous_response_id=previous)
        assert result.final_output == f"It is sunny in {asked[-1]}."
        previous = result.last_response_id
        assert previous is not None
        results = [item.to_input_item() for item in result.new_items
                   if item.type == "tool_call_output_item"]  # fmt: skip
        assert len(results) == 1
    assert len(asked) == 4
    assert min(served) >= 2  # both gateways took their share of the model calls
    stored = await client.responses.input_items.list(previous, order="asc")
    kinds = [item.type for item in stored.data]
    assert kinds.count("function_call_output") == 3  # the earlier turns' results, kept
    await fresh.aclose()
