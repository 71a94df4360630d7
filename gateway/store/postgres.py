"""Stored responses in PostgreSQL: the engine for several gateway processes or pods sharing
one store (``[responses] store_url = "postgresql://..."``), through asyncpg's pool.

The schema is created (and migrated) on first use, inside a transaction that holds an advisory
lock, so gateways starting at once neither race nor fail on each other's ``CREATE``; a
``mmgw_schema`` row records the version. Every call runs within the store's deadline: a
database that is down, refusing, restarting or slow is answered ``StoreUnavailable`` (503 with
Retry-After) at once, and the next call connects again, so the gateway heals by itself when the
database returns; connections a restart left dead are expired and the call tried once more.

Byte caps: a write takes a per-scope advisory lock, so one API key's quota holds exactly under
concurrent writes; the total cap is checked in the same transaction without a global lock, so
concurrent writers of different keys may pass it by what they write at that moment.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from gateway.errors import GatewayError, StoreError, StoreFull, StoreUnavailable
from gateway.store import postgres_conversations as conversations
from gateway.store.base import (
    MAX_CHAIN,
    Retention,
    StoredConversation,
    StoredResponse,
    cancellable,
    cancelled,
    decoded,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

SCHEMA_VERSION = 3  # 2: conversations; 3: background streams' events
LOCK_SPACE = 0x6D6D6777  # "mmgw": the first key of every advisory lock the store takes
_SCHEMA = """
CREATE TABLE IF NOT EXISTS mmgw_responses (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    previous_id TEXT,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL,
    bytes BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS mmgw_responses_by_age ON mmgw_responses (created_at, seq);
CREATE INDEX IF NOT EXISTS mmgw_responses_by_scope ON mmgw_responses (scope) INCLUDE (bytes);
"""
_COLUMNS = "id, scope, created_at, previous_id, response, input_items"
_CHAIN = f"""
WITH RECURSIVE walk AS (
    SELECT {_COLUMNS}, 1 AS depth FROM mmgw_responses
    WHERE id = $1 AND scope = $2 AND created_at >= $3
  UNION ALL
    SELECT r.id, r.scope, r.created_at, r.previous_id, r.response, r.input_items, w.depth + 1
    FROM mmgw_responses r JOIN walk w ON r.id = w.previous_id
    WHERE r.scope = $2 AND r.created_at >= $3 AND w.depth < {MAX_CHAIN}
)
SELECT {_COLUMNS} FROM walk ORDER BY depth DESC
"""
# The database cannot serve now, but may soon: refused (503), tried again on the next call.
_UNAVAILABLE = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting, cancelled
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, out of memory
    asyncpg.exceptions.ReadOnlySQLTransactionError,  # a standby, during a failover
)
# A connection that was good before the database restarted: retried once on a fresh one.
_STALE = (asyncpg.exceptions.ConnectionDoesNotExistError, asyncpg.InterfaceError)


class PostgresStore:
    """Stored responses in the PostgreSQL database at ``url``; nothing connects until the
    first call."""

    def __init__(
        self, url: str, retention: Retention, timeout_s: float = 5.0, max_connections: int = 10
    ) -> None:
        self.url = url
        self.retention = retention
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()
        self._migrated = False

    async def _connections(self) -> asyncpg.Pool:
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self.url, min_size=0, max_size=self.max_connections,
                    timeout=self.timeout_s, command_timeout=self.timeout_s,
                )  # fmt: skip
            return self._pool

    async def _run(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """``work`` on a pooled connection within the deadline; the driver's errors become the
        gateway's (503 for what retrying may fix, 507 for a full disk)."""
        try:
            return await asyncio.wait_for(self._attempt(work), self.timeout_s)
        except GatewayError:
            raise
        except asyncio.TimeoutError:
            log.error("response store: PostgreSQL did not answer within %ss", self.timeout_s)
            raise StoreUnavailable(
                f"the response store did not answer within {self.timeout_s}s"
            ) from None
        except asyncpg.exceptions.DiskFullError as exc:
            log.error("response store: %s", exc)
            raise StoreFull("the response store's disk is full") from exc
        except _UNAVAILABLE as exc:
            log.error("response store: PostgreSQL unavailable: %s", exc)
            raise StoreUnavailable(
                f"the response store cannot be reached ({type(exc).__name__})"
            ) from exc
        except asyncpg.PostgresError as exc:
            log.error("response store: PostgreSQL failed: %s", exc)
            raise StoreError(f"the response store failed: {type(exc).__name__}") from exc

    async def _attempt(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        pool = await self._connections()
        for retry in (False, True):
            try:
                async with pool.acquire() as connection:
                    if not self._migrated:
                        await _migrate(connection)
                        self._migrated = True
                    return await work(connection)
            except _STALE:
                if retry:
                    raise
                await pool.expire_connections()  # every idle one may be dead: reconnect them
        raise AssertionError("unreachable")

    async def check_room(self, scope: str, adding: int) -> None:
        retention = self.retention

        async def check(db: asyncpg.Connection) -> None:
            retention.check_room(*await _usage(db, scope), adding)

        await self._run(check)

    async def put(self, stored: StoredResponse, keep_cancelled: bool = False) -> bool:
        response, items = stored.encoded()
        size = len(response) + len(items)
        retention = self.retention

        async def write(db: asyncpg.Connection) -> bool:
            async with db.transaction():
                await _lock_scope(db, stored.scope)
                if keep_cancelled:
                    current = await db.fetchval(
                        "SELECT response FROM mmgw_responses WHERE id = $1 FOR UPDATE", stored.id
                    )
                    if current is not None and json.loads(current).get("status") == "cancelled":
                        return False
                expired = await db.execute(
                    "DELETE FROM mmgw_responses WHERE created_at < $1",
                    time.time() - retention.max_age_s,
                )
                await db.execute("DELETE FROM mmgw_responses WHERE id = $1", stored.id)
                retention.check_room(*await _usage(db, stored.scope), size)
                await db.execute(
                    f"INSERT INTO mmgw_responses ({_COLUMNS}, bytes) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    stored.id, stored.scope, stored.created_at, stored.previous_id, response,
                    items, size,
                )  # fmt: skip
                evicted = await db.execute(
                    "DELETE FROM mmgw_responses WHERE id IN (SELECT id FROM mmgw_responses "
                    "ORDER BY created_at DESC, seq DESC OFFSET $1)",
                    retention.max_responses,
                )
                if (expired, evicted) != ("DELETE 0", "DELETE 0"):
                    await db.execute(  # their streams' events go with them
                        "DELETE FROM mmgw_response_events e WHERE NOT EXISTS "
                        "(SELECT 1 FROM mmgw_responses r WHERE r.id = e.response_id)"
                    )
            return True

        return await self._run(write)

    async def cancel(self, response_id: str, scope: str) -> StoredResponse | None:
        oldest = time.time() - self.retention.max_age_s

        async def mark(db: asyncpg.Connection) -> StoredResponse | None:
            async with db.transaction():
                row = await db.fetchrow(
                    f"SELECT {_COLUMNS} FROM mmgw_responses "
                    "WHERE id = $1 AND scope = $2 AND created_at >= $3 FOR UPDATE",
                    response_id, scope, oldest,
                )  # fmt: skip
                if row is None:
                    return None
                found = decoded(tuple(row))
                if not cancellable(found):
                    return found
                marked = cancelled(found)
                response, items = marked.encoded()
                await db.execute(
                    "UPDATE mmgw_responses SET response = $1, bytes = $2 WHERE id = $3",
                    response, len(response) + len(items), response_id,
                )  # fmt: skip
                return marked

        return await self._run(mark)

    async def get(self, response_id: str, scope: str) -> StoredResponse | None:
        oldest = time.time() - self.retention.max_age_s

        async def read(db: asyncpg.Connection) -> StoredResponse | None:
            row = await db.fetchrow(
                f"SELECT {_COLUMNS} FROM mmgw_responses "
                "WHERE id = $1 AND scope = $2 AND created_at >= $3",
                response_id, scope, oldest,
            )  # fmt: skip
            return None if row is None else decoded(tuple(row))

        return await self._run(read)

    async def chain(self, response_id: str, scope: str) -> list[StoredResponse]:
        oldest = time.time() - self.retention.max_age_s

        async def walk(db: asyncpg.Connection) -> list[StoredResponse]:
            rows = await db.fetch(_CHAIN, response_id, scope, oldest)
            return [decoded(tuple(row)) for row in rows]

        return await self._run(walk)

    async def delete(self, response_id: str, scope: str) -> bool:
        async def remove(db: asyncpg.Connection) -> bool:
            status: str = await db.execute(
                "DELETE FROM mmgw_responses WHERE id = $1 AND scope = $2", response_id, scope
            )
            if status == "DELETE 0":
                return False
            await db.execute("DELETE FROM mmgw_response_events WHERE response_id = $1", response_id)
            return True

        return await self._run(remove)

    async def add_events(self, response_id: str, events: list[tuple[int, str]]) -> None:
        async def add(db: asyncpg.Connection) -> None:
            await db.executemany(
                "INSERT INTO mmgw_response_events VALUES ($1, $2, $3) "
                "ON CONFLICT (response_id, seq) DO NOTHING",
                [(response_id, seq, frame) for seq, frame in events],
            )

        await self._run(add)

    async def events_after(
        self, response_id: str, scope: str, after: int
    ) -> list[tuple[int, str]] | None:
        oldest = time.time() - self.retention.max_age_s

        async def read(db: asyncpg.Connection) -> list[tuple[int, str]] | None:
            found = await db.fetchval(
                "SELECT 1 FROM mmgw_responses WHERE id = $1 AND scope = $2 AND created_at >= $3",
                response_id, scope, oldest,
            )  # fmt: skip
            if found is None:
                return None
            rows = await db.fetch(
                "SELECT seq, frame FROM mmgw_response_events WHERE response_id = $1 AND seq > $2 "
                "ORDER BY seq",
                response_id, after,
            )  # fmt: skip
            return [(int(row[0]), row[1]) for row in rows]

        return await self._run(read)

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        size = sum(map(len, conversations.encoded(items)))
        retention = self.retention

        async def create(db: asyncpg.Connection) -> None:
            async with db.transaction():
                await _lock_scope(db, conversation.scope)
                retention.check_room(*await _usage(db, conversation.scope), size)
                await conversations.insert(db, conversation)
                await conversations.append(db, conversation.id, conversation.scope, items)

        await self._run(create)

    async def get_conversation(self, conversation_id: str, scope: str) -> StoredConversation | None:
        return await self._run(lambda db: conversations.read(db, conversation_id, scope))

    async def set_metadata(
        self, conversation_id: str, scope: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        async def update(db: asyncpg.Connection) -> StoredConversation | None:
            return await conversations.set_metadata(db, conversation_id, scope, metadata)

        return await self._run(update)

    async def delete_conversation(self, conversation_id: str, scope: str) -> bool:
        return await self._run(lambda db: conversations.delete(db, conversation_id, scope))

    async def add_items(
        self, conversation_id: str, scope: str, items: list[dict[str, Any]]
    ) -> bool:
        size = sum(map(len, conversations.encoded(items)))
        retention = self.retention

        async def add(db: asyncpg.Connection) -> bool:
            async with db.transaction():
                await _lock_scope(db, scope)
                if await conversations.read(db, conversation_id, scope, lock=True) is None:
                    return False
                retention.check_room(*await _usage(db, scope), size)
                await conversations.append(db, conversation_id, scope, items)
            return True

        return await self._run(add)

    async def conversation_items(
        self, conversation_id: str, scope: str
    ) -> list[dict[str, Any]] | None:
        async def read(db: asyncpg.Connection) -> list[dict[str, Any]] | None:
            async with db.transaction(isolation="repeatable_read", readonly=True):  # one snapshot
                if await conversations.read(db, conversation_id, scope) is None:
                    return None
                return await conversations.items(db, conversation_id)

        return await self._run(read)

    async def delete_item(self, conversation_id: str, scope: str, item_id: str) -> bool | None:
        async def remove(db: asyncpg.Connection) -> bool | None:
            async with db.transaction():
                if await conversations.read(db, conversation_id, scope, lock=True) is None:
                    return None
                return await conversations.delete_item(db, conversation_id, item_id)

        return await self._run(remove)

    async def close(self) -> None:
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(), self.timeout_s)
            except (asyncio.TimeoutError, *_UNAVAILABLE):
                self._pool.terminate()
            self._pool = None


async def _usage(db: asyncpg.Connection, scope: str) -> tuple[int, int]:
    """Bytes stored in all, and in ``scope``: responses and conversation items."""
    row: Any = await db.fetchrow(
        "SELECT coalesce(sum(bytes), 0), coalesce(sum(bytes) FILTER (WHERE scope = $1), 0) "
        "FROM (SELECT scope, bytes FROM mmgw_responses "
        "UNION ALL SELECT scope, bytes FROM mmgw_conversation_items) AS stored",
        scope,
    )
    return int(row[0]), int(row[1])


async def _lock_scope(db: asyncpg.Connection, scope: str) -> None:
    """One writer per API key at a time (its quota holds); released with the transaction."""
    await db.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", LOCK_SPACE, scope)


async def _migrate(db: asyncpg.Connection) -> None:
    """The schema at ``SCHEMA_VERSION``, made under an advisory lock: one gateway creates it,
    the others wait for it and find it done."""
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock($1, 0)", LOCK_SPACE)
        await db.execute(
            "CREATE TABLE IF NOT EXISTS mmgw_schema (component TEXT PRIMARY KEY, "
            "version INTEGER NOT NULL)"
        )
        version = await db.fetchval("SELECT version FROM mmgw_schema WHERE component = 'responses'")
        if version == SCHEMA_VERSION:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"the response store's schema is version {version}, newer than this gateway's "
                f"{SCHEMA_VERSION}: upgrade the gateway"
            )
        await db.execute(_SCHEMA + conversations.SCHEMA)  # every statement IF NOT EXISTS
        await db.execute(
            "INSERT INTO mmgw_schema VALUES ('responses', $1) "
            "ON CONFLICT (component) DO UPDATE SET version = $1",
            SCHEMA_VERSION,
        )
