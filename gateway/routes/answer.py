"""The last step of every endpoint: the relay's items as one JSON body or as an SSE stream.

The client is watched from the moment the request is read: preparing the request (fetching and
decoding media, a language guess), waiting in Triton's queue and prefill all happen while a
disconnect watcher runs, so a client that leaves before its first token cancels that work too.
Streamed: the first item is pulled before the response starts, so a failure up to the first
token keeps its status code; the rest goes out through the one SSE writer. Not streamed: the
whole answer is collected under the same watch.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import Response
from typing_extensions import assert_never

from gateway.errors import UpstreamFailed, UpstreamLost
from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import (
    ChoiceDone,
    Done,
    ReasoningDelta,
    Relay,
    RelayEvent,
    TextDelta,
    ToolCallPiece,
)
from gateway.families.tool_formats.base import ToolCall
from gateway.observability.record import RequestRecord, record_of
from gateway.pipeline.choices import merged
from gateway.pipeline.reasoning import with_reasoning
from gateway.pipeline.relay import Prepared, relay
from gateway.pipeline.structured.events import with_tools
from gateway.streaming.disconnect import ClientDisconnected, DisconnectWatch
from gateway.streaming.response import EventStreamResponse
from gateway.streaming.sse import EventFormat, first_item, stream_events
from gateway.streaming.tool_chunks import CallGatherer

log = logging.getLogger(__name__)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left; nobody reads it

Events = Relay


@dataclass(frozen=True)
class Answer:
    """A whole non-streamed answer: each choice's text and outcome, and the request's."""

    texts: list[str]
    outcomes: list[Outcome]
    total: Outcome
    tokens: list[list[TokenLogprob]]  # each choice's tokens with log probs (when asked for)
    tool_calls: list[list[ToolCall]] = field(default_factory=list)  # per choice, if any
    # Per choice: a reasoning model's reasoning; None where the choice wrote none.
    reasoning: list[str | None] = field(default_factory=list)


def relays(prepared: list[Prepared], request_id: str, record: RequestRecord) -> Events:
    """One choice: its relay as is (the per-token fast path); several: merged, each with a
    Triton request id of its own."""
    if len(prepared) == 1:
        return _relay(prepared[0], request_id, record)
    streams = [_relay(p, f"{request_id}-{i}", record) for i, p in enumerate(prepared)]
    return merged(streams, record)


def _relay(prepared: Prepared, request_id: str, record: RequestRecord) -> Relay:
    """One choice's relay: its reasoning split off first (a reasoning model's), then its
    answer read through its tool-call parser (when it has one), which so never sees the
    reasoning."""
    events = relay(prepared, request_id, record)
    if prepared.reasoning is not None:
        events = with_reasoning(events, prepared.reasoning)
    return events if prepared.tool_parser is None else with_tools(events, prepared.tool_parser())


async def answer(
    request: Request,
    begin: Callable[[], Awaitable[Events]],
    stream: EventFormat | None,
    body: Callable[[Answer], Response],
) -> Response:
    """``begin()`` prepares the request and returns its events; ``stream`` given: SSE in that
    format, otherwise ``body(answer)``."""
    watch = DisconnectWatch(request.receive)
    try:
        if stream is None:
            whole = await watch.run(_whole(begin, record_of(request.state)))
            await watch.close()
            return body(whole)
        events, first = await watch.run(_first(begin))
    except ClientDisconnected:
        await watch.close()
        return Response(status_code=CLIENT_CLOSED_REQUEST)  # the work was cancelled
    except BaseException:
        await watch.close()
        raise
    frames = stream_events(first, events, stream)
    return EventStreamResponse(frames, SSE_HEADERS, watch)  # it watches on, then closes it


async def _first(begin: Callable[[], Awaitable[Events]]) -> tuple[Events, RelayEvent]:
    events = await begin()
    return events, await first_item(events)


async def _whole(begin: Callable[[], Awaitable[Events]], record: RequestRecord) -> Answer:
    """The whole answer; generated once more when the replica generating it died (the set has
    taken it out, and nothing has been sent to the client yet)."""
    try:
        return await collect(await begin())
    except UpstreamLost as exc:
        log.warning("a replica was lost mid-answer (%s); generating it once more", exc.message)
        record.error_code = None
        return await collect(await begin())


async def collect(events: Events) -> Answer:
    """The whole answer of a non-streamed request (the relay is closed on every path)."""
    texts: dict[int, list[str]] = {}
    tokens: dict[int, list[TokenLogprob]] = {}
    outcomes: dict[int, Outcome] = {}
    calls: dict[int, CallGatherer] = {}
    thoughts: dict[int, list[str]] = {}
    try:
        async for event in events:
            match event:
                case TextDelta(text, index, scored):
                    texts.setdefault(index, []).append(text)
                    if scored is not None:
                        tokens.setdefault(index, []).extend(scored)
                case ReasoningDelta(text, index, scored):  # its tokens first, in order
                    thoughts.setdefault(index, []).append(text)
                    if scored is not None:
                        tokens.setdefault(index, []).extend(scored)
                case ToolCallPiece(delta, index):
                    calls.setdefault(index, CallGatherer()).add(delta)
                case ChoiceDone(outcome, index):
                    outcomes[index] = outcome
                case Done(total):
                    if not outcomes:  # one choice: its outcome is the request's
                        outcomes[0] = total
                    count = len(outcomes)
                    joined = ["".join(texts.get(i, [])) for i in range(count)]
                    scored_tokens = [tokens.get(i, []) for i in range(count)]
                    gathered = [calls[i].calls() if i in calls else [] for i in range(count)]
                    finals = [outcomes[i] for i in range(count)]
                    reasoned = [
                        "".join(thoughts[i]) if i in thoughts else None for i in range(count)
                    ]
                    return Answer(joined, finals, total, scored_tokens, gathered, reasoned)
                case _:
                    assert_never(event)
    finally:
        await events.aclose()
    raise UpstreamFailed("the generation ended without an outcome")
