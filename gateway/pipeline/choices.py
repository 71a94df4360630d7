"""Several choices of one request (``n``, or several prompts), relayed as one stream.

Each choice is a relay of its own, a Triton request of its own (with its own seed); they run
concurrently and their events come out as they arrive, each with its choice's ``index``,
each choice ending with its own ``ChoiceDone``; the stream then ends with one ``Done`` whose
usage is their sum. Closing the stream closes every relay (and so cancels every Triton
request): the choices are cancelled together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from typing_extensions import assert_never

from gateway.errors import shutdown_of
from gateway.families.calls import FinishReason, Outcome
from gateway.families.events import (
    ChoiceDone,
    Done,
    ReasoningDelta,
    Relay,
    RelayEvent,
    TextDelta,
    ToolCallPiece,
)
from gateway.observability.record import RequestRecord
from gateway.protocol.common import UsageCounts


def summed(outcomes: Sequence[Outcome]) -> Outcome:
    """One outcome for the request: usage added up (the prompt counted once per choice, as
    each choice's Triton request read it), cached and media tokens likewise."""
    cached = [o.usage.cached_tokens for o in outcomes if o.usage.cached_tokens is not None]
    thought = [o.usage.reasoning_tokens for o in outcomes if o.usage.reasoning_tokens is not None]
    media = [o.usage.media for o in outcomes if o.usage.media is not None]
    usage = UsageCounts(
        prompt_tokens=sum(o.usage.prompt_tokens for o in outcomes),
        completion_tokens=sum(o.usage.completion_tokens for o in outcomes),
        cached_tokens=sum(cached) if cached else None,
        reasoning_tokens=sum(thought) if thought else None,
        media=sum(media[1:], media[0]) if media else None,
    )
    finish: FinishReason = (
        "length" if any(o.finish_reason == "length" for o in outcomes) else "stop"
    )
    return Outcome(finish, usage)


def of_choice(event: RelayEvent, index: int) -> RelayEvent:
    """One choice's event as choice ``index``'s (its ``Done`` becomes a ``ChoiceDone``)."""
    match event:
        case TextDelta(text, _, tokens):
            return TextDelta(text, index, tokens)
        case ReasoningDelta(text, _, tokens):
            return ReasoningDelta(text, index, tokens)
        case ToolCallPiece(delta, _):
            return ToolCallPiece(delta, index)
        case ChoiceDone(outcome, _) | Done(outcome):
            return ChoiceDone(outcome, index)
        case _:
            assert_never(event)


async def merged(relays: Sequence[Relay], record: RequestRecord | None = None) -> Relay:
    """The relays' events as they come, each with its choice's index, every choice ending
    with a ``ChoiceDone``; then one ``Done`` with their summed outcome."""
    queue: asyncio.Queue[tuple[int, RelayEvent | BaseException | None]] = asyncio.Queue()

    async def pump(index: int, relay: Relay) -> None:
        try:
            async for event in relay:
                await queue.put((index, event))
            await queue.put((index, None))
        except Exception as exc:
            await queue.put((index, exc))

    tasks = [asyncio.ensure_future(pump(i, relay)) for i, relay in enumerate(relays)]
    outcomes: dict[int, Outcome] = {}
    ended = 0
    try:
        while ended < len(tasks):
            try:
                index, item = await queue.get()
            except asyncio.CancelledError as cancel:
                shutdown = shutdown_of(cancel)
                if shutdown is None:
                    raise
                raise shutdown from None
            if item is None:
                ended += 1
                continue
            if isinstance(item, BaseException):
                raise item
            event = of_choice(item, index)
            if isinstance(event, ChoiceDone):
                outcomes[index] = event.outcome
            yield event
        total = summed([outcomes[i] for i in sorted(outcomes)])
        if record is not None:
            record.set_usage(total.usage, total.finish_reason)
        yield Done(total)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for relay in relays:
            await relay.aclose()
