"""One choice's relay read through its tool parser: content and call deltas, then the outcome.

The relay yields text as Triton writes it; here that text is split into content and
``ToolCallDelta``s (markup held back, never sent as content), and a choice that made a call
and stopped on its own ends with ``finish_reason`` ``tool_calls``. One cut by ``max_tokens``
keeps ``length``, with the call it was writing given as far as it got (streamed or not, as
OpenAI does): its arguments are not valid JSON, and ``length`` says why.
"""

from __future__ import annotations

from dataclasses import replace

from typing_extensions import assert_never

from gateway.families.events import (
    ChoiceDone,
    Done,
    ReasoningDelta,
    Relay,
    TextDelta,
    ToolCallPiece,
)
from gateway.families.tool_formats.base import Piece, ToolParser


def _events(pieces: list[Piece]) -> list[TextDelta | ToolCallPiece]:
    return [TextDelta(p) if isinstance(p, str) else ToolCallPiece(p) for p in pieces if p]


async def with_tools(events: Relay, parser: ToolParser) -> Relay:
    """One choice's ``events`` through ``parser``. Text deltas are read as their text: the
    pipeline refuses ``logprobs`` with tools, so none carries tokens here."""
    try:
        async for event in events:
            match event:
                case TextDelta(text):
                    for piece in _events(parser.feed(text)):
                        yield piece
                case Done(outcome):
                    for piece in _events(parser.close(cut=outcome.finish_reason == "length")):
                        yield piece
                    if parser.calls and outcome.finish_reason == "stop":
                        outcome = replace(outcome, finish_reason="tool_calls")
                    yield Done(outcome)
                    return
                case ReasoningDelta():  # the reasoning: never read for calls
                    yield event
                case ToolCallPiece() | ChoiceDone():  # a relay's own events are text and Done
                    yield event
                case _:
                    assert_never(event)
    finally:
        await events.aclose()
