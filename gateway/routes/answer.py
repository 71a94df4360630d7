"""The last step of every endpoint: the relay's items as one JSON body or as an SSE stream.

The client is watched from the moment the request is read: preparing the request (fetching and
decoding media, a language guess), waiting in Triton's queue and prefill all happen while a
disconnect watcher runs, so a client that leaves before its first token cancels that work too.
Streamed: the first item is pulled before the response starts, so a failure up to the first
token keeps its status code; the rest goes out through the one SSE writer. Not streamed: the
whole answer is collected under the same watch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import Request
from fastapi.responses import Response

from gateway.errors import UpstreamFailed
from gateway.families.calls import Outcome
from gateway.streaming.disconnect import ClientDisconnected, DisconnectWatch
from gateway.streaming.response import EventStreamResponse
from gateway.streaming.sse import EventFormat, first_item, stream_events

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left; nobody reads it

Events = AsyncIterator[str | Outcome]


async def answer(
    request: Request,
    begin: Callable[[], Awaitable[Events]],
    stream: EventFormat | None,
    body: Callable[[str, Outcome], Response],
) -> Response:
    """``begin()`` prepares the request and returns the relay; ``stream`` given: SSE in that
    format, otherwise ``body(text, outcome)``."""
    watch = DisconnectWatch(request.receive)
    try:
        if stream is None:
            text, outcome = await watch.run(_whole(begin))
            await watch.close()
            return body(text, outcome)
        events, first = await watch.run(_first(begin))
    except ClientDisconnected:
        await watch.close()
        return Response(status_code=CLIENT_CLOSED_REQUEST)  # the work was cancelled
    except BaseException:
        await watch.close()
        raise
    frames = stream_events(first, events, stream)
    return EventStreamResponse(frames, SSE_HEADERS, watch)  # it watches on, then closes it


async def _first(begin: Callable[[], Awaitable[Events]]) -> tuple[Events, str | Outcome]:
    events = await begin()
    return events, await first_item(events)


async def _whole(begin: Callable[[], Awaitable[Events]]) -> tuple[str, Outcome]:
    return await collect(await begin())


async def collect(events: Events) -> tuple[str, Outcome]:
    """The whole answer of a non-streamed request (the relay is closed on every path)."""
    texts: list[str] = []
    try:
        async for item in events:
            if isinstance(item, Outcome):
                return "".join(texts), item
            texts.append(item)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    raise UpstreamFailed("the generation ended without an outcome")
