"""Stored responses in one SQLite file: what ``previous_response_id``, ``GET``, ``DELETE`` and
``input_items`` of ``/v1/responses`` read.

Why SQLite: one file, no server, transactions, and several gateway processes on one host can
share it (WAL lets readers run beside the one writer; ``busy_timeout`` makes a second writer
wait its turn instead of failing). Every call runs on one worker thread that owns the
connection, so the event loop never blocks on the disk and the connection is never shared
between threads. The file is opened (and its folder made) on first use.

A row holds the response object as the API returned it and the request's own input items
(normalised, each with its id), as JSON; ``previous_id`` links a continuation to the response
it continued, so a conversation is rebuilt by walking back (``chain``). Images are kept as the
request sent them (a ``data:`` URL is its bytes; an http(s) URL is fetched again), so a
continuation decodes the same bytes and gets the same KV-cache id. Every row belongs to a
scope (the API key that created it, as a digest); a row of another scope does not exist for
the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gateway.errors import GatewayError

T = TypeVar("T")
log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    created_at REAL NOT NULL,
    previous_id TEXT,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (created_at);
"""
BUSY_TIMEOUT_MS = 10_000  # how long a writer waits for another process's transaction
MAX_CHAIN = 1_000  # responses one conversation may go back through


@contextlib.contextmanager
def _writing(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, its write lock taken first (``BEGIN IMMEDIATE`` waits out
    ``busy_timeout``). A deferred transaction that reads and then writes is refused at once
    with "database is locked" when another process writes meanwhile (SQLite does not wait
    there: it would deadlock), which is what several gateway workers would hit."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _patiently(statement: Callable[[], object]) -> None:
    """Switching a new file to WAL takes an exclusive lock that ``busy_timeout`` does not wait
    for in every SQLite: retried for as long as a writer would wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@dataclass(frozen=True)
class Retention:
    """How many responses the store keeps, and for how long."""

    max_responses: int
    max_age_s: float


@dataclass(frozen=True)
class StoredResponse:
    """One stored response: the object as returned, and its request's own input items."""

    id: str
    scope: str
    created_at: float
    previous_id: str | None
    response: dict[str, Any]
    input_items: list[dict[str, Any]]

    def encoded(self) -> tuple[str, str]:
        """The JSON columns; their size is what ``max_stored_bytes`` bounds."""
        return (
            json.dumps(self.response, separators=(",", ":")),
            json.dumps(self.input_items, separators=(",", ":")),
        )


class ResponseStore:
    """Stored responses in the SQLite file at ``path``; every method runs off the event loop."""

    def __init__(self, path: Path, retention: Retention) -> None:
        self.path = path
        self.retention = retention
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmgw-store")
        self._connection: sqlite3.Connection | None = None

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on the store's thread; SQLite's errors become the gateway's (a 500)."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, lambda: work(self._connect()))
        except (sqlite3.Error, OSError) as exc:
            log.error("response store %s failed: %s", self.path, exc)
            raise GatewayError(
                f"the response store failed: {type(exc).__name__}", code="store_failed"
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        """The connection, opened on first use (on the store's thread)."""
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit: every write opens its own BEGIN IMMEDIATE (``_writing``).
            connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _patiently(lambda: connection.execute("PRAGMA journal_mode = WAL"))
            connection.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints
            with _writing(connection):
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._connection = connection
        return self._connection

    async def put(self, stored: StoredResponse) -> None:
        """Write one response and enforce the retention limits, in one transaction."""
        response, items = stored.encoded()
        retention = self.retention

        def write(db: sqlite3.Connection) -> None:
            with _writing(db):
                db.execute(
                    "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                    (stored.id, stored.scope, stored.created_at, stored.previous_id, response,
                     items),
                )  # fmt: skip
                db.execute(
                    "DELETE FROM responses WHERE created_at < ?",
                    (time.time() - retention.max_age_s,),
                )
                db.execute(
                    "DELETE FROM responses WHERE id IN (SELECT id FROM responses "
                    "ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?)",
                    (retention.max_responses,),
                )

        await self._run(write)

    async def get(self, response_id: str, scope: str) -> StoredResponse | None:
        """The response, if it exists in ``scope`` and has not expired."""
        oldest = time.time() - self.retention.max_age_s
        return await self._run(lambda db: _read(db, response_id, scope, oldest))

    async def chain(self, response_id: str, scope: str) -> list[StoredResponse]:
        """The conversation ending at ``response_id``, oldest first, as far back as it is
        still stored: empty when the response itself is gone; the first one has a
        ``previous_id`` when a response it continued is gone (or it goes back further than
        ``MAX_CHAIN``)."""
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
        """True when the response existed in ``scope`` and is now gone."""

        def remove(db: sqlite3.Connection) -> bool:
            with _writing(db):
                cursor = db.execute(
                    "DELETE FROM responses WHERE id = ? AND scope = ?", (response_id, scope)
                )
            return cursor.rowcount > 0

        return await self._run(remove)

    async def close(self) -> None:
        def shut(_: sqlite3.Connection | None = None) -> None:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=True)


def _read(
    db: sqlite3.Connection, response_id: str, scope: str, oldest: float
) -> StoredResponse | None:
    row = db.execute(
        "SELECT id, scope, created_at, previous_id, response, input_items FROM responses "
        "WHERE id = ? AND scope = ? AND created_at >= ?",
        (response_id, scope, oldest),
    ).fetchone()
    if row is None:
        return None
    return StoredResponse(row[0], row[1], row[2], row[3], json.loads(row[4]), json.loads(row[5]))
