"""The Responses event stream for every kind of event a relay can yield (text deltas, with
and without token log probabilities, tool-call pieces), replayed through the OpenAI SDK's own stream
accumulator (what ``client.responses.stream`` runs), so its helpers work unchanged."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.errors import UpstreamTimeout
from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import Done, RelayEvent, TextDelta, ToolCallPiece
from gateway.families.tool_formats.base import ToolCallDelta
from gateway.protocol.common import UsageCounts
from gateway.streaming.response_events import ResponseBuilder, ResponseEvents
from gateway.streaming.sse import stream_events

EVENT = TypeAdapter(ResponseStreamEvent)
ECHO = {"model": "m", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def Delta(index: int, id: str | None, name: str | None, arguments: str) -> ToolCallPiece:
    """A tool-call piece as a parser yields it."""
    return ToolCallPiece(ToolCallDelta(index, arguments, id, name))


def Scored(text: str) -> TextDelta:
    """A text delta with token log probabilities."""
    return TextDelta(text, 0, (TokenLogprob(text, -0.5),))


async def relay(items: list[Any], builder: ResponseBuilder) -> AsyncGenerator[RelayEvent, None]:
    """The relay's events, each fed to the builder first (as ``pipeline.responses.stored``)."""
    for item in items:
        if isinstance(item, Outcome):
            builder.finish(item)
            yield Done(item)
        elif isinstance(item, Exception):
            raise item
        else:
            event = TextDelta(item) if isinstance(item, str) else item
            builder.add(event)
            yield event


async def stream(items: list[Any]) -> list[dict[str, Any]]:
    builder = ResponseBuilder("resp_1", 1, ECHO)
    events = relay(items, builder)
    first = await anext(events)
    body = b"".join([f async for f in stream_events(first, events, ResponseEvents(builder))])
    payloads = []
    for block in body.decode().split("\n\n")[:-1]:
        payloads.append(json.loads(block.split("\n")[1][len("data: ") :]))
    return payloads


def replay(payloads: list[dict[str, Any]]) -> ResponseStreamState[Any]:
    """The events through the SDK's accumulator; it raises on any it cannot place."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for payload in payloads:
        state.handle_event(EVENT.validate_python(payload))
    return state


DONE = Outcome("stop", UsageCounts(5, 4))


async def test_text_then_parallel_tool_calls() -> None:
    items = [
        "Let me ", Scored("check."),
        Delta(0, "call_a", "weather", '{"city": '), Delta(0, None, None, '"Oslo"}'),
        Delta(1, "call_b", "time", "{}"),
        DONE,
    ]  # fmt: skip
    payloads = await stream(items)
    kinds = [p["type"] for p in payloads]
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]  # fmt: skip
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    final = replay(payloads)._completed_response
    assert final is not None
    message, weather, clock = final.output
    assert message.type == "message" and final.output_text == "Let me check."
    assert weather.type == "function_call" and clock.type == "function_call"
    assert (weather.call_id, weather.name, weather.arguments) == (
        "call_a",
        "weather",
        '{"city": "Oslo"}',
    )
    assert (clock.call_id, clock.arguments) == ("call_b", "{}")
    Response.model_validate(payloads[-1]["response"])


async def test_a_tool_call_alone() -> None:
    payloads = await stream([Delta(0, "call_a", "f", '{"x": 1}'), DONE])
    final = replay(payloads)._completed_response
    assert final is not None
    (call,) = final.output
    assert call.type == "function_call" and call.arguments == '{"x": 1}'
    added = next(p for p in payloads if p["type"] == "response.output_item.added")
    assert added["item"]["arguments"] == ""  # the arguments arrive as deltas only


async def test_a_failure_mid_stream_is_response_failed_with_the_text_so_far() -> None:
    payloads = await stream(["Hel", "lo", UpstreamTimeout("Triton went silent")])
    last = payloads[-1]
    assert last["type"] == "response.failed" and last["sequence_number"] == len(payloads) - 1
    response = Response.model_validate(last["response"])
    assert response.status == "failed" and response.error is not None
    assert "Triton went silent" in response.error.message
    assert response.output_text == "Hello"
    replay(payloads)


async def test_an_empty_answer_completes_with_no_output() -> None:
    payloads = await stream([Outcome("stop", UsageCounts(5, 0))])
    assert [p["type"] for p in payloads] == [
        "response.created",
        "response.in_progress",
        "response.completed",
    ]
    replay(payloads)
