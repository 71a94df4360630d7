"""The store suites' engines: each test that asks for ``opener`` runs on both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store import ResponseStore, Retention
from tests.gateway.store.engines import DAY, Opener, postgres_opener, sqlite_opener


@pytest.fixture(params=["sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens stores of one engine on one shared place; closes them all at the end."""
    if request.param == "sqlite":
        base = sqlite_opener(tmp_path)
    else:
        server = request.getfixturevalue("postgres_server")  # only where it is asked for
        base = postgres_opener(await server.new_database())
    opened: list[ResponseStore] = []

    def open_one(retention: Retention) -> ResponseStore:
        opened.append(base(retention))
        return opened[-1]

    yield open_one
    for store in opened:
        await store.close()


@pytest.fixture
def store(opener: Opener) -> ResponseStore:
    return opener(Retention(100, 30 * DAY))
