"""The last step of every endpoint: the relay's items as one JSON body or as an SSE stream.

Streamed: the first item is pulled before the response starts, so a failure up to the first
token keeps its status code; the rest goes out through the one SSE writer. Not streamed: the
whole answer is collected while the client is watched, and its leaving cancels the work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from fastapi import Request
from fastapi.responses import Response

from gateway.errors import UpstreamFailed
from gateway.families.calls import Outcome
from gateway.streaming.disconnect import ClientDisconnected, cancel_on_disconnect
from gateway.streaming.response import EventStreamResponse
from gateway.streaming.sse import EventFormat, first_item, stream_events

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left; nobody reads it


async def answer(
    request: Request,
    events: AsyncIterator[str | Outcome],
    stream: EventFormat | None,
    body: Callable[[str, Outcome], Response],
) -> Response:
    """``stream`` given: SSE in that format; otherwise ``body(text, outcome)``."""
    if stream is not None:
        first = await first_item(events)
        return EventStreamResponse(stream_events(first, events, stream), SSE_HEADERS)
    try:
        text, outcome = await cancel_on_disconnect(request.receive, collect(events))
    except ClientDisconnected:
        return Response(status_code=CLIENT_CLOSED_REQUEST)  # the work was cancelled
    return body(text, outcome)


async def collect(events: AsyncIterator[str | Outcome]) -> tuple[str, Outcome]:
    """The whole answer of a non-streamed request."""
    texts: list[str] = []
    async for item in events:
        if isinstance(item, Outcome):
            return "".join(texts), item
        texts.append(item)
    raise UpstreamFailed("the generation ended without an outcome")
