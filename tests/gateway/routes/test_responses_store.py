"""The stored responses' routes over both store engines: a store that cannot be used is a fast
503 with Retry-After for what needs it (and nothing else), it heals without a restart, and the
byte caps refuse a response before any generation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.store import SqliteStore
from tests.fakes.app import FakeGateway, assert_openai_error, http_client, start_gateway
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.test_responses import URL, ask
from tests.postgres import PostgresServer

KEYS = ("sk-store-a", "sk-store-b")


class Outage:
    """Takes one engine's store away and gives it back."""

    def __init__(self, take: Callable[[], None], give: Callable[[], None]) -> None:
        self.take, self.give = take, give

    async def begin(self, gateway: FakeGateway) -> None:
        self.take()
        store = gateway.runtime.store
        if isinstance(store, SqliteStore):  # as a process that opens the file now would find it
            await asyncio.get_running_loop().run_in_executor(store._executor, store._drop)


@pytest.fixture(params=["sqlite", "postgres"])
async def engine(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, Any], Outage]]:
    """The ``[responses]`` settings of one engine, and how to make its store unavailable."""
    if request.param == "sqlite":
        folder = tmp_path / "store"
        blocker = tmp_path / "blocker"

        def take() -> None:  # its folder replaced by a file: the file cannot be opened
            folder.rename(blocker) if folder.exists() else None
            folder.write_text("not a folder")

        def give() -> None:
            folder.unlink()
            if blocker.exists():
                blocker.rename(folder)

        yield {"store_path": folder / "responses.sqlite3"}, Outage(take, give)
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = await server.new_database()
        yield {"store_url": url, "timeout_s": 2}, Outage(server.stop, server.start)


@pytest.fixture
async def gateway(
    session_fake: FakeTriton, engine: tuple[dict[str, Any], Outage]
) -> AsyncIterator[FakeGateway]:
    session_fake.reset()
    built = await start_gateway(session_fake, api_keys=KEYS, responses=engine[0])
    yield built
    await built.aclose()


def key(index: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[index]}"}


async def test_an_unavailable_store_refuses_only_what_needs_it_and_heals(
    gateway: FakeGateway, engine: tuple[dict[str, Any], Outage], session_fake: FakeTriton
) -> None:
    outage = engine[1]
    async with http_client(gateway.app, headers=key(0)) as http:
        created = (await http.post(URL, json=ask("Remember me."))).json()
        path = f"{URL}/{created['id']}"
        await outage.begin(gateway)
        try:
            session_fake.requests.clear()
            calls = [
                http.post(URL, json=ask()),
                http.post(URL, json=ask(previous_response_id=created["id"], store=False)),
                http.get(path),
                http.get(f"{path}/input_items"),
                http.delete(path),
            ]
            for call in calls:
                refused = await call
                assert_openai_error(refused, 503, "store_unavailable")
                assert refused.headers["retry-after"] == "1"
            assert not session_fake.requests  # refused before any generation
            unstored = await http.post(URL, json=ask(store=False))
            assert unstored.status_code == 200, unstored.text  # no store needed: served
        finally:
            outage.give()
        assert (await http.get(path)).json() == created  # healed without a restart
        follow = await http.post(URL, json=ask(previous_response_id=created["id"]))
        assert follow.status_code == 200
        assert (await http.delete(path)).status_code == 200


async def test_a_key_past_its_quota_is_refused_before_generation(
    session_fake: FakeTriton, engine: tuple[dict[str, Any], Outage]
) -> None:
    session_fake.reset()
    settings = {**engine[0], "max_bytes_per_key": 3000, "max_total_bytes": 1 << 20}
    gateway = await start_gateway(session_fake, api_keys=KEYS, responses=settings)
    try:
        async with http_client(gateway.app) as http:
            stored = []
            for _ in range(20):
                reply = await http.post(URL, json=ask("y" * 1000), headers=key(0))
                if reply.status_code != 200:
                    break
                stored.append(reply.json()["id"])
            error = assert_openai_error(reply, 429, "store_quota_exceeded")
            assert error["type"] == "insufficient_quota" and error["param"] == "store"
            assert 1 <= len(stored) < 5
            session_fake.requests.clear()
            again = await http.post(URL, json=ask("y" * 1000), headers=key(0))
            assert_openai_error(again, 429, "store_quota_exceeded")
            assert not session_fake.requests  # no work for a response that cannot be kept
            other = await http.post(URL, json=ask("y" * 1000), headers=key(1))
            assert other.status_code == 200  # another key has its own quota
            assert (await http.post(URL, json=ask(store=False), headers=key(0))).status_code == 200
            for response_id in stored:  # space is freed through the API
                deleted = await http.delete(f"{URL}/{response_id}", headers=key(0))
                assert deleted.status_code == 200
            assert (await http.post(URL, json=ask("y" * 1000), headers=key(0))).status_code == 200
    finally:
        await gateway.aclose()


async def test_a_full_store_is_507_for_every_key(
    session_fake: FakeTriton, engine: tuple[dict[str, Any], Outage]
) -> None:
    session_fake.reset()
    settings = {**engine[0], "max_total_bytes": 6000}
    gateway = await start_gateway(session_fake, api_keys=KEYS, responses=settings)
    try:
        async with http_client(gateway.app) as http:
            replies: list[httpx.Response] = []
            for index in range(20):
                replies.append(await http.post(URL, json=ask("z" * 1000), headers=key(index % 2)))
                if replies[-1].status_code != 200:
                    break
            assert_openai_error(replies[-1], 507, "store_full")
            assert len(replies) > 2
    finally:
        await gateway.aclose()
