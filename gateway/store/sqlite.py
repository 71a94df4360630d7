"""Stored responses in one SQLite file: the default engine of ``ResponseStore``.

Why SQLite: one file, no server, transactions, and several gateway processes on one host can
share it (WAL lets readers run beside the one writer; ``busy_timeout`` makes a second writer
wait its turn instead of failing). Every call runs on one worker thread that owns the
connection, so the event loop never blocks on the disk and the connection is never shared
between threads; a call that outlives the store's deadline is answered ``StoreUnavailable``
while the thread finishes it.

The connection is opened on first use and dropped after any error of the disk (read-only, I/O,
cannot open): the next call opens it again, so a store whose disk was read-only (a crash left
its WAL files, the volume came back read-only) heals by itself once the disk is writable, and a
connection whose setup failed is closed, never leaked.

A full disk: a few MiB are held in a reserve file beside the database (``.reserve``) while
there is room. A ``put`` needs the reserve in place (else ``StoreFull``); a ``delete`` that
meets a full disk releases it and tries again, so space can always be freed through the API.
New files use incremental auto-vacuum, and a delete gives its pages back to the file system.

A row holds the response object as the API returned it and the request's own input items
(normalised, each with its id), as JSON; ``previous_id`` links a continuation to the response
it continued, so a conversation is rebuilt by walking back (``chain``); ``bytes`` is the size
of the two JSON columns, what the byte caps count.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from gateway.errors import GatewayError, StoreError, StoreFull, StoreUnavailable
from gateway.store import sqlite_conversations as conversations
from gateway.store.base import (
    MAX_CHAIN,
    Retention,
    StoredConversation,
    StoredResponse,
    cancellable,
    cancelled,
)
from gateway.store.sqlite_rows import (
    _give_back_space,
    _is_full,
    _patiently,
    _read,
    _status,
    _usage,
    _writing,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

SCHEMA_VERSION = 4  # 2: byte counts; 3: conversations; 4: background streams' events
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    created_at REAL NOT NULL,
    previous_id TEXT,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL,
    bytes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (created_at);
CREATE INDEX IF NOT EXISTS responses_by_scope ON responses (scope, bytes);
"""
# Version 1 had no byte count: the column is added and filled.
_MIGRATE_1 = (
    "ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    "UPDATE responses SET bytes = length(response) + length(input_items)",
)
RESERVE_BYTES = 8 * 1024 * 1024  # what a delete on a full disk may write (WAL pages)
_COLUMNS = "id, scope, created_at, previous_id, response, input_items"


class SqliteStore:
    """Stored responses in the SQLite file at ``path``; every method runs off the event loop."""

    def __init__(self, path: Path, retention: Retention, timeout_s: float = 5.0) -> None:
        self.path = path
        self.retention = retention
        self.timeout_s = timeout_s
        self.reserve = path.with_name(path.name + ".reserve")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmgw-store")
        self._connection: sqlite3.Connection | None = None
        self._closed = False

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on the store's thread within the deadline; SQLite's and the disk's errors
        become the gateway's (503 for what retrying may fix, 507 for a full disk)."""
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(self._executor, self._guarded, work)
        try:
            return await asyncio.wait_for(call, self.timeout_s)
        except asyncio.TimeoutError:
            log.error("response store %s: no answer within %ss", self.path, self.timeout_s)
            raise StoreUnavailable(
                f"the response store did not answer within {self.timeout_s}s"
            ) from None

    def _guarded(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return work(self._connect())
        except GatewayError:
            raise
        except (sqlite3.Error, OSError) as exc:
            log.error("response store %s failed: %s", self.path, exc)
            name = type(exc).__name__
            if _is_full(exc):
                raise StoreFull(f"the response store's disk is full ({name})") from exc
            if isinstance(exc, (sqlite3.OperationalError, OSError)):
                self._drop()  # a disk error: open afresh on the next call
                raise StoreUnavailable(
                    f"the response store cannot be used now ({name}: {exc})"
                ) from exc
            raise StoreError(f"the response store failed: {name}") from exc

    def _drop(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None

    def _connect(self) -> sqlite3.Connection:
        """The connection, opened on first use (on the store's thread); closed again when its
        setup fails, so a failing disk leaks no handle and the next call tries afresh."""
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit: every write opens its own BEGIN IMMEDIATE (``_writing``).
            connection = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
            try:
                self._set_up(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _set_up(self, db: sqlite3.Connection) -> None:
        db.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect on a new file only
        _patiently(lambda: db.execute("PRAGMA journal_mode = WAL"), self.timeout_s)
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            return
        with _writing(db):
            (version,) = db.execute("PRAGMA user_version").fetchone()  # another process's?
            if version == 1:
                for statement in _MIGRATE_1:
                    db.execute(statement)
            for statement in (_SCHEMA + conversations.SCHEMA).split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _hold_reserve(self) -> None:
        """The reserve file in place: made (allocated, not sparse) when missing."""
        if self.reserve.exists() and self.reserve.stat().st_size >= RESERVE_BYTES:
            return
        try:
            with open(self.reserve, "wb") as file:
                os.posix_fallocate(file.fileno(), 0, RESERVE_BYTES)
        except OSError:
            self.reserve.unlink(missing_ok=True)
            raise

    def _release_reserve(self) -> bool:
        try:
            self.reserve.unlink()
        except FileNotFoundError:
            return False
        log.warning("response store %s: disk full; reserve released to delete", self.path)
        return True

    async def check_room(self, scope: str, adding: int) -> None:
        retention = self.retention
        await self._run(lambda db: retention.check_room(*_usage(db, scope), adding))

    async def put(self, stored: StoredResponse, keep_cancelled: bool = False) -> bool:
        """Write one response and enforce the retention limits, in one transaction."""
        response, items = stored.encoded()
        size = len(response) + len(items)
        retention = self.retention

        def write(db: sqlite3.Connection) -> bool:
            self._hold_reserve()
            with _writing(db):
                if keep_cancelled and _status(db, stored.id) == "cancelled":
                    return False
                expired = db.execute(
                    "DELETE FROM responses WHERE created_at < ?",
                    (time.time() - retention.max_age_s,),
                ).rowcount
                db.execute("DELETE FROM responses WHERE id = ?", (stored.id,))
                retention.check_room(*_usage(db, stored.scope), size)
                db.execute(
                    f"INSERT INTO responses ({_COLUMNS}, bytes) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (stored.id, stored.scope, stored.created_at, stored.previous_id, response,
                     items, size),
                )  # fmt: skip
                expired += db.execute(
                    "DELETE FROM responses WHERE id IN (SELECT id FROM responses "
                    "ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?)",
                    (retention.max_responses,),
                ).rowcount
                if expired:  # their streams' events go with them
                    db.execute(
                        "DELETE FROM response_events WHERE response_id NOT IN "
                        "(SELECT id FROM responses)"
                    )
            return True

        return await self._run(write)

    async def cancel(self, response_id: str, scope: str) -> StoredResponse | None:
        oldest = time.time() - self.retention.max_age_s

        def mark(db: sqlite3.Connection) -> StoredResponse | None:
            with _writing(db):
                found = _read(db, response_id, scope, oldest)
                if found is None or not cancellable(found):
                    return found
                marked = cancelled(found)
                response, items = marked.encoded()
                db.execute(
                    "UPDATE responses SET response = ?, bytes = ? WHERE id = ?",
                    (response, len(response) + len(items), response_id),
                )
                return marked

        return await self._run(mark)

    async def get(self, response_id: str, scope: str) -> StoredResponse | None:
        oldest = time.time() - self.retention.max_age_s
        return await self._run(lambda db: _read(db, response_id, scope, oldest))

    async def chain(self, response_id: str, scope: str) -> list[StoredResponse]:
        oldest = time.time() - self.retention.max_age_s

        def walk(db: sqlite3.Connection) -> list[StoredResponse]:
            found: list[StoredResponse] = []
            wanted: str | None = response_id
            while wanted is not None and len(found) < MAX_CHAIN:
                row = _read(db, wanted, scope, oldest)
                if row is None:
                    break
                found.append(row)
                wanted = row.previous_id
            return found[::-1]

        return await self._run(walk)

    async def delete(self, response_id: str, scope: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            with _writing(db):
                cursor = db.execute(
                    "DELETE FROM responses WHERE id = ? AND scope = ?", (response_id, scope)
                )
                if cursor.rowcount:
                    db.execute("DELETE FROM response_events WHERE response_id = ?", (response_id,))
            _give_back_space(db)
            return cursor.rowcount > 0

        def remove_even_when_full(db: sqlite3.Connection) -> bool:
            try:
                return remove(db)
            except (sqlite3.Error, OSError) as exc:
                if not (_is_full(exc) and self._release_reserve()):
                    raise
            return remove(db)

        return await self._run(remove_even_when_full)

    async def add_events(self, response_id: str, events: list[tuple[int, str]]) -> None:
        def add(db: sqlite3.Connection) -> None:
            with _writing(db):
                db.executemany(
                    "INSERT OR REPLACE INTO response_events VALUES (?, ?, ?)",
                    [(response_id, seq, frame) for seq, frame in events],
                )

        await self._run(add)

    async def events_after(
        self, response_id: str, scope: str, after: int
    ) -> list[tuple[int, str]] | None:
        oldest = time.time() - self.retention.max_age_s

        def read(db: sqlite3.Connection) -> list[tuple[int, str]] | None:
            if _read(db, response_id, scope, oldest) is None:
                return None
            rows = db.execute(
                "SELECT seq, frame FROM response_events WHERE response_id = ? AND seq > ? "
                "ORDER BY seq",
                (response_id, after),
            )
            return [(int(row[0]), row[1]) for row in rows]

        return await self._run(read)

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        size = sum(map(len, conversations.encoded(items)))
        retention = self.retention

        def create(db: sqlite3.Connection) -> None:
            with _writing(db):
                retention.check_room(*_usage(db, conversation.scope), size)
                conversations.insert(db, conversation)
                conversations.append(db, conversation.id, conversation.scope, items)

        await self._run(create)

    async def get_conversation(self, conversation_id: str, scope: str) -> StoredConversation | None:
        return await self._run(lambda db: conversations.read(db, conversation_id, scope))

    async def set_metadata(
        self, conversation_id: str, scope: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        def update(db: sqlite3.Connection) -> StoredConversation | None:
            with _writing(db):
                return conversations.set_metadata(db, conversation_id, scope, metadata)

        return await self._run(update)

    async def delete_conversation(self, conversation_id: str, scope: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            with _writing(db):
                return conversations.delete(db, conversation_id, scope)

        return await self._run(remove)

    async def add_items(
        self, conversation_id: str, scope: str, items: list[dict[str, Any]]
    ) -> bool:
        size = sum(map(len, conversations.encoded(items)))
        retention = self.retention

        def add(db: sqlite3.Connection) -> bool:
            with _writing(db):
                if conversations.read(db, conversation_id, scope) is None:
                    return False
                retention.check_room(*_usage(db, scope), size)
                conversations.append(db, conversation_id, scope, items)
            return True

        return await self._run(add)

    async def conversation_items(
        self, conversation_id: str, scope: str
    ) -> list[dict[str, Any]] | None:
        def read(db: sqlite3.Connection) -> list[dict[str, Any]] | None:
            if conversations.read(db, conversation_id, scope) is None:
                return None
            return conversations.items(db, conversation_id)

        return await self._run(read)

    async def delete_item(self, conversation_id: str, scope: str, item_id: str) -> bool | None:
        def remove(db: sqlite3.Connection) -> bool | None:
            with _writing(db):
                if conversations.read(db, conversation_id, scope) is None:
                    return None
                return conversations.delete_item(db, conversation_id, item_id)

        return await self._run(remove)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._drop)
        self._executor.shutdown(wait=True)
