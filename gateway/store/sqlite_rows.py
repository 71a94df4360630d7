"""The SQLite store's statements and transactions, shared by ``sqlite.py``'s methods: the
write transaction, the WAL switch that waits its turn, a disk-full test, the byte usage, the
space a delete gives back, and reading one row."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator

from gateway.store.base import StoredResponse, decoded

log = logging.getLogger(__name__)
_COLUMNS = "id, scope, created_at, previous_id, response, input_items"


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
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _patiently(statement: Callable[[], object], wait_s: float) -> None:
    """Switching a new file to WAL takes an exclusive lock that ``busy_timeout`` does not wait
    for in every SQLite: retried for as long as a writer would wait."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _is_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)


def _usage(db: sqlite3.Connection, scope: str) -> tuple[int, int]:
    """Bytes stored in all, and in ``scope``: responses and conversation items."""
    total = mine = 0
    for table in ("responses", "conversation_items"):
        (all_of_it,) = db.execute(f"SELECT coalesce(sum(bytes), 0) FROM {table}").fetchone()
        (of_scope,) = db.execute(
            f"SELECT coalesce(sum(bytes), 0) FROM {table} WHERE scope = ?", (scope,)
        ).fetchone()
        total, mine = total + int(all_of_it), mine + int(of_scope)
    return total, mine


def _give_back_space(db: sqlite3.Connection) -> None:
    """Freed pages back to the file system (incremental auto-vacuum), and the WAL emptied:
    what a delete on a full disk is for. Best effort: a reader may hold the WAL."""
    try:
        db.execute("PRAGMA incremental_vacuum").fetchall()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError as exc:
        log.info("response store: space not given back yet: %s", exc)


def _read(
    db: sqlite3.Connection, response_id: str, scope: str, oldest: float
) -> StoredResponse | None:
    row = db.execute(
        f"SELECT {_COLUMNS} FROM responses WHERE id = ? AND scope = ? AND created_at >= ?",
        (response_id, scope, oldest),
    ).fetchone()
    return None if row is None else decoded(row)


def _status(db: sqlite3.Connection, response_id: str) -> str | None:
    """The stored response's status, whatever its scope (a background run's own row)."""
    row = db.execute("SELECT response FROM responses WHERE id = ?", (response_id,)).fetchone()
    return None if row is None else json.loads(row[0]).get("status")
