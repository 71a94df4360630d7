"""Function tools and ``text.format`` on /v1/responses, now that chat honours them: the
model's calls become ``function_call`` output items (streamed as the SDK's events), a tool
loop's items render in the family's tool format, and the format reaches Triton as a guide."""

from __future__ import annotations

import json

import httpx
from openai.types.responses import Response

from tests.fakes.triton import FakeTriton
from tests.gateway.routes.test_chat_tools import HERMES_ANSWER
from tests.gateway.routes.test_responses import URL, ask, events

TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}},
    {"type": "function", "name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}}},
]  # fmt: skip
EXPECTED = [
    ("get_weather", {"city": "Paris", "unit": "celsius"}),
    ("get_time", {"zone": "Asia/Tokyo"}),
]


async def test_calls_are_function_call_items(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    fake.script.tokens = HERMES_ANSWER
    reply = await http.post(URL, json=ask(model="fake-guided", tools=TOOLS))
    assert reply.status_code == 200, reply.text
    body = Response.model_validate(reply.json())
    message, *calls = body.output
    assert message.type == "message" and body.output_text == "Checking.\n"
    assert [(c.name, json.loads(c.arguments)) for c in calls] == EXPECTED
    assert all(c.type == "function_call" and c.call_id.startswith("call_") for c in calls)
    assert "<tools>" in fake.requests[-1].scalar("text_input")


async def test_streamed_calls_are_the_sdks_events(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = HERMES_ANSWER
    reply = await http.post(URL, json=ask(model="fake-guided", tools=TOOLS, stream=True))
    streamed = events(reply.text)
    done = [e["item"] for e in streamed if e["type"] == "response.output_item.done"]
    calls = [(i["name"], json.loads(i["arguments"])) for i in done if i["type"] == "function_call"]
    assert calls == EXPECTED
    deltas = [e for e in streamed if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 2  # the arguments arrive in pieces
    assert not any("<tool_call>" in e.get("delta", "") for e in streamed)


async def test_a_tool_loop_renders_in_the_format(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    loop = [
        {"role": "user", "content": "Time in Tokyo?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_time",
         "arguments": "{\"zone\": \"Asia/Tokyo\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "09:30"},
    ]  # fmt: skip
    reply = await http.post(URL, json=ask(loop, model="fake-guided", tools=TOOLS))
    assert reply.status_code == 200, reply.text
    prompt = fake.requests[-1].scalar("text_input")
    assert prompt.endswith("<tool_response>\n09:30\n</tool_response>")
    assert '<tool_call>\n{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}' in prompt


async def test_text_format_is_a_guide(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    text = {"format": {"type": "json_schema", "name": "A", "schema": schema}}
    fake.script.tokens = ['{"a": ', "1}"]
    reply = await http.post(URL, json=ask(model="fake-guided", text=text))
    assert reply.status_code == 200, reply.text
    assert reply.json()["output"][0]["content"][0]["text"] == '{"a": 1}'
    received = fake.requests[-1]
    assert received.scalar("guided_decoding_guide_type") == "json_schema"
    assert json.loads(received.scalar("guided_decoding_guide")) == schema


async def test_a_forced_tools_bad_parameters_are_named_as_the_responses_api_names_them(
    http: httpx.AsyncClient,
) -> None:
    """Issue 27 item 8: the tool's own field is blamed, not tool_choice, in this API's shape."""
    bad = [{"type": "function", "name": "get_time", "parameters": {"type": "strng"}}]
    choice = {"type": "function", "name": "get_time"}
    reply = await http.post(URL, json=ask(model="fake-guided", tools=bad, tool_choice=choice))
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "invalid_guide" and error["param"] == "tools[0].parameters"
    assert "'tools[0].parameters'" in error["message"] and "strng" in error["message"]


async def test_a_named_choice_of_no_offered_tool_is_named_as_the_responses_api_names_it(
    http: httpx.AsyncClient,
) -> None:
    """Issue 23 item 2: chat's ``tool_choice.function.name`` is this API's ``tool_choice.name``
    (the alias map renames places, never the message's text; the regex it replaced left this
    one in chat's shape)."""
    choice = {"type": "function", "name": "get_date"}
    reply = await http.post(URL, json=ask(model="fake-guided", tools=TOOLS, tool_choice=choice))
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "tool_choice.name", error
    assert "get_date" in error["message"]


async def test_a_function_tools_missing_field_is_named_like_any_other_field(
    http: httpx.AsyncClient,
) -> None:
    """Issue 23 item 2: one translator of pydantic's errors, so a function tool without a name
    is ``tools[0].name`` (as a body's missing field is), not the whole tool."""
    reply = await http.post(URL, json=ask(tools=[{"type": "function", "parameters": {}}]))
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "tools[0].name", error
    assert error["message"].startswith("tools[0].name: "), error
