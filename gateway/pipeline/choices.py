"""Several choices of one request (``n``, or several prompts), relayed as one stream.

Each choice is a relay of its own, a Triton request of its own (with its own seed); they run
concurrently and their items come out as they arrive, tagged with the choice's index
(``Choice``), each choice ending with its own ``Outcome``; the stream then ends with one
``Outcome`` whose usage is their sum. Closing the stream closes every relay (and so cancels
every Triton request): the choices are cancelled together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from gateway.families.calls import Choice, FinishReason, Outcome, Scored
from gateway.observability.record import RequestRecord
from gateway.protocol.common import UsageCounts

Events = AsyncIterator[str | Scored | Outcome]


def summed(outcomes: Sequence[Outcome]) -> Outcome:
    """One outcome for the request: usage added up (the prompt counted once per choice, as
    each choice's Triton request read it), cached tokens likewise."""
    cached = [o.usage.cached_tokens for o in outcomes if o.usage.cached_tokens is not None]
    usage = UsageCounts(
        prompt_tokens=sum(o.usage.prompt_tokens for o in outcomes),
        completion_tokens=sum(o.usage.completion_tokens for o in outcomes),
        cached_tokens=sum(cached) if cached else None,
    )
    finish: FinishReason = (
        "length" if any(o.finish_reason == "length" for o in outcomes) else "stop"
    )
    return Outcome(finish, usage)


async def merged(
    relays: Sequence[Events], record: RequestRecord | None = None
) -> AsyncIterator[Choice | Outcome]:
    """The relays' items as they come, as ``Choice``s; then their summed ``Outcome``."""
    queue: asyncio.Queue[tuple[int, str | Scored | Outcome | BaseException | None]] = (
        asyncio.Queue()
    )

    async def pump(index: int, relay: Events) -> None:
        try:
            async for item in relay:
                await queue.put((index, item))
            await queue.put((index, None))
        except Exception as exc:
            await queue.put((index, exc))

    tasks = [asyncio.ensure_future(pump(i, relay)) for i, relay in enumerate(relays)]
    outcomes: dict[int, Outcome] = {}
    ended = 0
    try:
        while ended < len(tasks):
            index, item = await queue.get()
            if item is None:
                ended += 1
                continue
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, Outcome):
                outcomes[index] = item
            yield Choice(index, item)
        total = summed([outcomes[i] for i in sorted(outcomes)])
        if record is not None:
            record.set_usage(total.usage, total.finish_reason)
        yield total
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for relay in relays:
            await relay.aclose()  # type: ignore[attr-defined]
