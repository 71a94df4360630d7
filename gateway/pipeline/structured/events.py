"""One choice's relay read through its tool parser: content and call deltas, then the outcome.

The relay yields text as Triton writes it; here that text is split into content and
``ToolCallDelta``s (markup held back, never sent as content), and a choice that made a call
and stopped on its own ends with ``finish_reason`` ``tool_calls``. One cut by ``max_tokens``
keeps ``length``, with the call it was writing given as far as it got (streamed or not, as
OpenAI does): its arguments are not valid JSON, and ``length`` says why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from gateway.families.calls import Outcome, Scored
from gateway.families.tool_formats.base import Piece, ToolParser


async def with_tools(
    events: AsyncIterator[str | Scored | Outcome], parser: ToolParser
) -> AsyncIterator[Piece | Outcome]:
    """``events`` through ``parser``. Scored pieces are read as their text: the pipeline
    refuses ``logprobs`` with tools, so none carries tokens here."""
    try:
        async for item in events:
            if isinstance(item, Outcome):
                for piece in parser.close(cut=item.finish_reason == "length"):
                    yield piece
                if parser.calls and item.finish_reason == "stop":
                    item = replace(item, finish_reason="tool_calls")
                yield item
                return
            for piece in parser.feed(item.text if isinstance(item, Scored) else item):
                yield piece
    finally:
        await events.aclose()  # type: ignore[attr-defined]
