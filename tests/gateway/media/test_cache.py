"""ContentCache (TTL, LRU, byte budget) and SingleFlight (one task per key, own error copies)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.errors import MediaFetchError
from gateway.media.cache import ContentCache, SingleFlight


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_ttl_expiry() -> None:
    clock = Clock()
    cache: ContentCache[str] = ContentCache(4, 100, ttl_s=10, clock=clock)
    cache.put("a", "A", 1)
    clock.now = 9.9
    assert cache.get("a") == "A"
    clock.now = 10.0
    assert cache.get("a") is None and len(cache) == 0 and cache.size_bytes == 0


def test_lru_eviction_by_count_and_bytes() -> None:
    cache: ContentCache[str] = ContentCache(2, 100, ttl_s=60)
    cache.put("a", "A", 10)
    cache.put("b", "B", 10)
    assert cache.get("a") == "A"  # a is now the most recent
    cache.put("c", "C", 10)
    assert cache.get("b") is None and cache.get("a") == "A" and cache.get("c") == "C"
    cache.put("d", "D", 25)  # fits the per-item cap (100 // 4) but not the total with a and c
    assert len(cache) == 2 and cache.size_bytes == 35


def test_oversize_items_and_disabled_cache_keep_nothing() -> None:
    cache: ContentCache[str] = ContentCache(4, 100, ttl_s=60)
    cache.put("big", "X", 26)  # over a quarter of the budget
    assert cache.get("big") is None
    off: ContentCache[str] = ContentCache(0, 100, ttl_s=60)
    off.put("a", "A", 1)
    assert off.get("a") is None


def test_replacing_a_key_keeps_the_byte_count_right() -> None:
    cache: ContentCache[str] = ContentCache(4, 100, ttl_s=60)
    cache.put("a", "A", 10)
    cache.put("a", "A2", 20)
    assert cache.get("a") == "A2" and cache.size_bytes == 20


async def test_single_flight_runs_once_per_key() -> None:
    flight: SingleFlight[int] = SingleFlight()
    calls = 0

    async def work() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return 42

    results = await asyncio.gather(*(flight.run("k", work) for _ in range(5)))
    assert results == [42] * 5 and calls == 1 and len(flight) == 0
    await flight.run("k", work)  # finished tasks are forgotten: a later call runs again
    assert calls == 2


async def test_single_flight_errors_are_copies_and_cancel_is_shielded() -> None:
    flight: SingleFlight[int] = SingleFlight()
    started = asyncio.Event()

    async def failing() -> int:
        started.set()
        await asyncio.sleep(0.05)
        raise MediaFetchError("boom")

    first = asyncio.create_task(flight.run("k", failing))
    second = asyncio.create_task(flight.run("k", failing))
    third = asyncio.create_task(flight.run("k", failing))
    await started.wait()
    first.cancel()  # one caller leaving does not cancel the shared task
    errors = await asyncio.gather(second, third, return_exceptions=True)
    assert all(isinstance(e, MediaFetchError) and e.message == "boom" for e in errors)
    assert errors[0] is not errors[1]
    with pytest.raises(asyncio.CancelledError):
        await first
