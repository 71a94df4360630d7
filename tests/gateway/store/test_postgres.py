"""What only the PostgreSQL engine has: its schema made once by gateways starting together, and
a database that is down, silent or restarted (the session's real server, stopped and started)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.errors import StoreUnavailable
from gateway.store import PostgresStore, Retention
from gateway.store.postgres import SCHEMA_VERSION
from gateway.triton.embedded import free_loopback_port
from tests.gateway.store.engines import DAY, record
from tests.postgres import PostgresServer


async def test_gateways_starting_at_once_make_the_schema_once(postgres_url: str) -> None:
    stores = [PostgresStore(postgres_url, Retention(10, DAY)) for _ in range(6)]
    await asyncio.gather(*(s.put(record(f"resp_{i}")) for i, s in enumerate(stores)))
    for store in stores:
        assert all([await store.get(f"resp_{i}", "") for i in range(6)])
        await store.close()
    connection = await asyncpg.connect(postgres_url)
    try:
        assert await connection.fetchval("SELECT version FROM mmgw_schema") == SCHEMA_VERSION
        assert await connection.fetchval("SELECT count(*) FROM mmgw_responses") == 6
    finally:
        await connection.close()


async def test_a_database_that_is_not_there_is_refused_at_once() -> None:
    store = PostgresStore(
        f"postgresql://postgres@127.0.0.1:{free_loopback_port()}/none", Retention(10, DAY)
    )
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as raised:
        await store.get("resp_1", "")
    assert time.monotonic() - started < 3
    assert raised.value.status_code == 503 and raised.value.retry_after_s
    await store.close()


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A port that accepts connections and never answers (a hung database)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in held:
        writer.close()
    server.close()


async def test_a_silent_database_is_refused_within_the_deadline(silent_port: int) -> None:
    store = PostgresStore(
        f"postgresql://postgres@127.0.0.1:{silent_port}/x", Retention(10, DAY), timeout_s=0.5
    )
    for call in (store.get("resp_1", ""), store.put(record("resp_1")), store.delete("r", "")):
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await call
        assert time.monotonic() - started < 3  # the deadline, loosely
    await store.close()


async def test_a_restarted_database_is_used_again_without_reopening_the_store(
    postgres_server: PostgresServer,
) -> None:
    url = await postgres_server.new_database()
    store = PostgresStore(url, Retention(10, DAY), timeout_s=2)
    await store.put(record("resp_1"))
    await store.get("resp_1", "")  # a pooled connection now open
    postgres_server.stop()
    try:
        with pytest.raises(StoreUnavailable):
            await store.get("resp_1", "")
    finally:
        postgres_server.start()
    assert await store.get("resp_1", "") is not None  # dead connections replaced
    await store.put(record("resp_2", previous="resp_1"))
    assert [r.id for r in await store.chain("resp_2", "")] == ["resp_1", "resp_2"]
    await store.close()
