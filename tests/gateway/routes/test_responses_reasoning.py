"""Reasoning models on /v1/responses: a ``reasoning`` output item (``reasoning_text``
content, as openai's ``ResponseReasoningItem``) before the message, its
``response.reasoning_text.*`` events, ``output_tokens_details.reasoning_tokens``, stored and
continued (earlier reasoning is never fed back into the prompt), checked with the SDK's types."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseReasoningItem

from tests.fakes.app import FakeGateway
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.test_chat_reasoning import (
    R1_ANSWER,
    R1_CONTENT,
    R1_REASONING,
    R1_REASONING_TOKENS,
)
from tests.gateway.routes.test_chat_tools import HERMES_ANSWER, TOOLS
from tests.gateway.routes.test_responses import ask, events

URL = "/v1/responses"


@pytest.fixture
async def client(gateway: FakeGateway) -> AsyncIterator[openai.AsyncOpenAI]:
    transport = httpx.ASGITransport(app=gateway.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="unused", http_client=http)


def check_reasoning_output(response: Response) -> None:
    thought, message = response.output
    assert isinstance(thought, ResponseReasoningItem)
    assert thought.summary == [] and thought.status == "completed"
    assert [(part.type, part.text) for part in thought.content or ()] == [
        ("reasoning_text", R1_REASONING)
    ]
    assert message.type == "message" and response.output_text == R1_CONTENT
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == R1_REASONING_TOKENS


async def test_a_response_has_a_reasoning_item_before_its_message(
    client: openai.AsyncOpenAI, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    response = await client.responses.create(model="fake-r1", input="What is 2 + 2?")
    check_reasoning_output(response)


async def test_the_stream_sends_reasoning_text_events_then_the_message(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    reply = await http.post(URL, json=ask(model="fake-r1", stream=True))
    sent = events(reply.text)  # each checked against the SDK's event union
    kinds = [e["type"] for e in sent]
    first_text = kinds.index("response.output_text.delta")
    assert kinds[:5] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.reasoning_text.delta",
    ]  # fmt: skip
    assert kinds[first_text - 5 : first_text] == [
        "response.reasoning_text.done", "response.content_part.done",
        "response.output_item.done", "response.output_item.added", "response.content_part.added",
    ]  # fmt: skip
    deltas = [e["delta"] for e in sent if e["type"] == "response.reasoning_text.delta"]
    assert "".join(deltas) == R1_REASONING
    (done,) = [e for e in sent if e["type"] == "response.reasoning_text.done"]
    assert done["text"] == R1_REASONING and done["output_index"] == 0
    assert sent[2]["item"]["type"] == "reasoning" and sent[3]["part"]["type"] == "reasoning_text"
    check_reasoning_output(Response.model_validate(sent[-1]["response"]))


async def test_the_sdk_stream_helper_ends_with_the_reasoning_item(
    client: openai.AsyncOpenAI, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    async with client.responses.stream(model="fake-r1", input="What is 2 + 2?") as stream:
        reasoning = [e.delta async for e in stream if e.type == "response.reasoning_text.delta"]
        final = await stream.get_final_response()
    assert "".join(reasoning) == R1_REASONING
    check_reasoning_output(final)


async def test_a_continuation_keeps_the_reasoning_stored_but_out_of_the_prompt(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    first = (await http.post(URL, json=ask("What is 2 + 2?", model="fake-r1"))).json()
    stored = (await http.get(f"{URL}/{first['id']}")).json()
    assert [item["type"] for item in stored["output"]] == ["reasoning", "message"]
    assert stored["output"][0]["content"][0]["text"] == R1_REASONING
    follow = await http.post(
        URL, json=ask("And 3 + 3?", model="fake-r1", previous_response_id=first["id"])
    )
    assert follow.status_code == 200, follow.text
    prompt = fake.requests[-1].scalar("text_input")
    assert R1_CONTENT.strip() in prompt and "And 3 + 3?" in prompt
    assert R1_REASONING not in prompt


async def test_reasoning_items_in_the_input_are_kept_and_not_prompted(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """A client managing its own context sends the reasoning items back, as OpenAI asks."""
    given = [
        {"role": "user", "content": "What is 2 + 2?"},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "secret musing"}]},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
    ]  # fmt: skip
    reply = await http.post(URL, json=ask(given, model="fake-r1"))
    assert reply.status_code == 200, reply.text
    assert "secret musing" not in fake.requests[-1].scalar("text_input")
    listed = (await http.get(f"{URL}/{reply.json()['id']}/input_items")).json()["data"]
    kinds = sorted(item["type"] for item in listed)
    assert kinds == ["message", "message", "message", "reasoning"]


async def test_reasoning_effort_is_refused_by_its_responses_name(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    reply = await http.post(URL, json=ask(model="fake-r1", reasoning={"effort": "high"}))
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "reasoning.effort" and "reasoning.effort" in error["message"]
    assert not fake.requests


async def test_reasoning_then_function_calls(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    """The reasoning item closes when the first call opens; its markup is no call."""
    fake.script.tokens = ["<think>", "call <tool_call>?", "</think>", *HERMES_ANSWER]
    tools = [{"type": "function", "name": t["function"]["name"],
              "parameters": t["function"].get("parameters")} for t in TOOLS]  # fmt: skip
    for stream in (False, True):
        reply = await http.post(URL, json=ask(model="fake-qwen3", tools=tools, stream=stream))
        assert reply.status_code == 200, reply.text
        body = events(reply.text)[-1]["response"] if stream else reply.json()
        response = Response.model_validate(body)
        kinds = [item.type for item in response.output]
        assert kinds == ["reasoning", "message", "function_call", "function_call"], kinds
        thought = response.output[0]
        assert isinstance(thought, ResponseReasoningItem) and thought.content is not None
        assert thought.content[0].text == "call <tool_call>?"
        assert thought.status == "completed"


async def test_a_conversation_keeps_the_reasoning_item_but_never_prompts_it(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    for question in ("What is 2 + 2?", "And 3 + 3?"):
        turn = ask(question, model="fake-r1", conversation=conversation)
        assert (await http.post(URL, json=turn)).status_code == 200
    prompt = fake.requests[-1].scalar("text_input")
    assert R1_CONTENT.strip() in prompt and R1_REASONING not in prompt
    items = (await http.get(f"/v1/conversations/{conversation}/items?order=asc")).json()["data"]
    assert [item["type"] for item in items] == ["message", "reasoning", "message"] * 2
