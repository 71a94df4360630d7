"""Several choices as one stream: when one choice is refused, every other choice's relay (and
so its Triton request) is closed with it, not left running (issue 22 item 5)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.errors import InvalidRequest
from gateway.pipeline.choices import merged


async def test_a_refused_choice_closes_every_other() -> None:
    closed: list[int] = []
    started = asyncio.Event()

    async def waiting(index: int) -> AsyncIterator[str]:
        try:
            started.set()
            await asyncio.Event().wait()  # queued in Triton: no token yet
            yield "never"
        finally:
            closed.append(index)

    async def refused() -> AsyncIterator[str]:
        await started.wait()
        raise InvalidRequest("the engine refused this prompt")
        yield ""  # an async generator

    relays = [waiting(0), refused(), *(waiting(i) for i in range(2, 32))]
    with pytest.raises(InvalidRequest):
        async for _ in merged(relays):
            pass
    assert sorted(closed) == [0, *range(2, 32)]
