"""What every response store keeps, for whom, for how long and how many bytes: one suite run on
both engines (a SQLite file in tmp_path, a database on the session's real PostgreSQL server),
so the two answer alike."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.errors import StoreFull, StoreQuotaExceeded
from gateway.store import ResponseStore, Retention
from tests.gateway.store.engines import (
    DAY,
    Opener,
    record,
)


async def test_a_response_is_kept_and_read_back(store: ResponseStore) -> None:
    await store.put(record("resp_1"))
    found = await store.get("resp_1", "")
    assert found is not None and found == record("resp_1", created_at=found.created_at)
    assert await store.get("resp_2", "") is None


async def test_a_response_is_read_back_by_another_store_on_the_same_place(opener: Opener) -> None:
    first, second = opener(Retention(10, DAY)), opener(Retention(10, DAY))
    await first.put(record("resp_1", scope="key-a"))
    assert (await second.get("resp_1", "key-a")) is not None
    await first.close()
    assert (await opener(Retention(10, DAY)).get("resp_1", "key-a")) is not None  # a reopen


async def test_a_response_is_invisible_to_another_scope(store: ResponseStore) -> None:
    await store.put(record("resp_1", scope="key-a"))
    assert await store.get("resp_1", "key-b") is None
    assert await store.chain("resp_1", "key-b") == []
    assert not await store.delete("resp_1", "key-b")
    assert await store.get("resp_1", "key-a") is not None
    assert await store.delete("resp_1", "key-a")
    assert await store.get("resp_1", "key-a") is None
    assert not await store.delete("resp_1", "key-a")


async def test_a_chain_is_read_oldest_first_as_far_back_as_it_is_stored(
    store: ResponseStore,
) -> None:
    await store.put(record("resp_1"))
    await store.put(record("resp_2", previous="resp_1"))
    await store.put(record("resp_3", previous="resp_2"))
    chain = await store.chain("resp_3", "")
    assert [r.id for r in chain] == ["resp_1", "resp_2", "resp_3"]
    assert chain[0].previous_id is None  # complete
    await store.delete("resp_2", "")
    (alone,) = await store.chain("resp_3", "")
    assert alone.previous_id == "resp_2"  # broken: what it continued is gone
    assert await store.chain("resp_9", "") == []


async def test_a_chain_does_not_cross_into_another_scope(store: ResponseStore) -> None:
    await store.put(record("resp_1", scope="key-a"))
    await store.put(record("resp_2", scope="key-b", previous="resp_1"))
    (alone,) = await store.chain("resp_2", "key-b")
    assert alone.previous_id == "resp_1"  # key-b cannot reach key-a's response


async def test_only_the_newest_responses_are_kept(opener: Opener) -> None:
    store = opener(Retention(3, DAY))
    now = time.time()
    for index in range(5):
        await store.put(record(f"resp_{index}", created_at=now + index))
    kept = [i for i in range(5) if await store.get(f"resp_{i}", "") is not None]
    assert kept == [2, 3, 4]


async def test_responses_older_than_the_age_limit_are_gone(opener: Opener) -> None:
    store = opener(Retention(100, DAY))
    await store.put(record("resp_old", created_at=time.time() - 2 * DAY))
    assert await store.get("resp_old", "") is None  # expired: not served even before deletion
    await store.put(record("resp_new"))
    young = opener(Retention(100, 10 * DAY))  # a longer retention would see it if kept
    assert await young.get("resp_old", "") is None  # deleted by the write
    assert await young.get("resp_new", "") is not None


def _size(response_id: str, scope: str = "", text: str = "") -> int:
    response, items = record(response_id, scope, text=text).encoded()
    return len(response) + len(items)


async def test_one_key_cannot_store_past_its_quota_and_deleting_frees_it(
    opener: Opener,
) -> None:
    one = _size("resp_0", "key-a", "x" * 1000)
    store = opener(Retention(100, DAY, max_total_bytes=100 * one, max_bytes_per_scope=3 * one))
    for index in range(3):
        await store.put(record(f"resp_{index}", "key-a", text="x" * 1000))
    with pytest.raises(StoreQuotaExceeded) as refused:
        await store.put(record("resp_3", "key-a", text="x" * 1000))
    assert refused.value.status_code == 429 and "quota" in refused.value.message
    assert await store.get("resp_3", "key-a") is None  # nothing half-written
    with pytest.raises(StoreQuotaExceeded):
        await store.check_room("key-a", 10)  # asked before generation: the same verdict
    await store.put(record("resp_b", "key-b", text="x" * 1000))  # another key is unaffected
    assert await store.delete("resp_0", "key-a")
    await store.check_room("key-a", one)
    await store.put(record("resp_3", "key-a", text="x" * 1000))


async def test_the_store_refuses_past_its_total_cap(opener: Opener) -> None:
    one = _size("resp_0", "key-0", "y" * 1000)
    store = opener(Retention(100, DAY, max_total_bytes=3 * one, max_bytes_per_scope=10 * one))
    for index in range(3):
        await store.put(record(f"resp_{index}", f"key-{index}", text="y" * 1000))
    with pytest.raises(StoreFull) as refused:
        await store.put(record("resp_3", "key-3", text="y" * 1000))
    assert refused.value.status_code == 507 and refused.value.code == "store_full"
    for index in range(3):  # nobody's responses were deleted to make room
        assert await store.get(f"resp_{index}", f"key-{index}") is not None
    await store.put(record("resp_0", "key-0", text="y" * 1000))  # a replacement fits


async def test_writers_on_one_place_all_land(opener: Opener) -> None:
    """Three stores on one place (as three gateway processes would have), writing at once:
    every response lands, none waits into an error."""
    stores = [opener(Retention(10_000, DAY)) for _ in range(3)]

    async def write(index: int, store: ResponseStore) -> None:
        for n in range(30):
            await store.put(record(f"resp_{index}_{n}", scope=f"key-{index}"))

    await asyncio.gather(*(write(i, s) for i, s in enumerate(stores)))
    for index in range(3):
        for n in range(30):
            assert await stores[(index + 1) % 3].get(f"resp_{index}_{n}", f"key-{index}")


async def test_a_quota_holds_under_concurrent_writes_of_one_key(opener: Opener) -> None:
    one = _size("resp_00", "key-a", "z" * 500)
    stores = [opener(Retention(1000, DAY, max_bytes_per_scope=5 * one)) for _ in range(3)]
    outcomes: list[bool] = []

    async def write(index: int) -> None:
        try:
            await stores[index % 3].put(record(f"resp_{index:02d}", "key-a", text="z" * 500))
            outcomes.append(True)
        except StoreQuotaExceeded:
            outcomes.append(False)

    await asyncio.gather(*(write(i) for i in range(12)))
    assert outcomes.count(True) == 5
