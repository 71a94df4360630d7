"""The stored responses' SQLite store, on real files in tmp_path: what it keeps, for whom, for
how long, across a reopen, and with several writers (threads and processes' connections) on
one file at once."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.errors import GatewayError
from gateway.store import ResponseStore, Retention, StoredResponse

DAY = 86400.0


def record(
    response_id: str,
    scope: str = "",
    previous: str | None = None,
    created_at: float | None = None,
) -> StoredResponse:
    output = [{"type": "message", "role": "assistant", "content": [{"text": response_id}]}]
    return StoredResponse(
        id=response_id,
        scope=scope,
        created_at=time.time() if created_at is None else created_at,
        previous_id=previous,
        response={"id": response_id, "object": "response", "output": output},
        input_items=[{"id": f"msg_{response_id}", "type": "message", "content": []}],
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ResponseStore]:
    opened = ResponseStore(tmp_path / "nested" / "responses.sqlite3", Retention(100, 30 * DAY))
    yield opened
    await opened.close()


async def test_a_response_is_kept_and_read_back(store: ResponseStore) -> None:
    await store.put(record("resp_1"))
    found = await store.get("resp_1", "")
    assert found is not None and found == record("resp_1", created_at=found.created_at)
    assert await store.get("resp_2", "") is None


async def test_the_file_is_made_on_first_use_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "responses.sqlite3"
    store = ResponseStore(path, Retention(10, DAY))
    assert not path.exists()  # nothing is created until a response is stored or read
    await store.put(record("resp_1"))
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (1,)


async def test_responses_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    first = ResponseStore(path, Retention(10, DAY))
    await first.put(record("resp_1"))
    await first.close()
    second = ResponseStore(path, Retention(10, DAY))
    assert (await second.get("resp_1", "")) is not None
    await second.close()


async def test_a_response_is_invisible_to_another_scope(store: ResponseStore) -> None:
    await store.put(record("resp_1", scope="key-a"))
    assert await store.get("resp_1", "key-b") is None
    assert await store.chain("resp_1", "key-b") == []
    assert not await store.delete("resp_1", "key-b")
    assert await store.get("resp_1", "key-a") is not None
    assert await store.delete("resp_1", "key-a")
    assert await store.get("resp_1", "key-a") is None


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


async def test_only_the_newest_responses_are_kept(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "r.sqlite3", Retention(3, DAY))
    now = time.time()
    for index in range(5):
        await store.put(record(f"resp_{index}", created_at=now + index))
    kept = [i for i in range(5) if await store.get(f"resp_{i}", "") is not None]
    assert kept == [2, 3, 4]
    await store.close()


async def test_responses_older_than_the_age_limit_are_gone(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "r.sqlite3", Retention(100, DAY))
    await store.put(record("resp_old", created_at=time.time() - 2 * DAY))
    assert await store.get("resp_old", "") is None  # expired: not served even before deletion
    await store.put(record("resp_new"))
    await store.close()
    with sqlite3.connect(tmp_path / "r.sqlite3") as db:
        ids = [row[0] for row in db.execute("SELECT id FROM responses")]
    assert ids == ["resp_new"]  # and deleted by the next write


async def test_writers_on_one_file_all_land(tmp_path: Path) -> None:
    """Three stores on one file (as three gateway processes would have), each writing from
    its own thread at once: every response lands, none waits into an error."""
    path = tmp_path / "shared.sqlite3"
    stores = [ResponseStore(path, Retention(10_000, DAY)) for _ in range(3)]

    async def write(index: int, store: ResponseStore) -> None:
        for n in range(40):
            await store.put(record(f"resp_{index}_{n}", scope=f"key-{index}"))

    await asyncio.gather(*(write(i, s) for i, s in enumerate(stores)))
    for index in range(3):
        for n in range(40):
            assert await stores[(index + 1) % 3].get(f"resp_{index}_{n}", f"key-{index}")
    for store in stores:
        await store.close()


async def test_a_store_that_cannot_open_its_file_fails_as_a_gateway_error(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = ResponseStore(blocker / "responses.sqlite3", Retention(10, DAY))
    with pytest.raises(GatewayError) as raised:
        await store.put(record("resp_1"))
    assert raised.value.code == "store_failed"
    await store.close()
