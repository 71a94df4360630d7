"""The Conversations API's rows in the SQLite store: one ``conversations`` row each, and its
items as ``conversation_items`` rows in the order they were added (``position``); the schema
also holds ``response_events``, a streamed background response's events. Each function
runs on the store's thread inside the transaction ``SqliteStore`` opened, so an append reads
the last position and writes after it without another writer in between."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from gateway.store.base import StoredConversation

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    created_at REAL NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_items (
    conversation_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    id TEXT NOT NULL,
    scope TEXT NOT NULL,
    item TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, position)
);
CREATE INDEX IF NOT EXISTS conversation_items_by_scope ON conversation_items (scope, bytes);
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);
"""


def encoded(items: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(item, separators=(",", ":")) for item in items]


def insert(db: sqlite3.Connection, conversation: StoredConversation) -> None:
    db.execute(
        "INSERT INTO conversations VALUES (?, ?, ?, ?)",
        (conversation.id, conversation.scope, conversation.created_at,
         json.dumps(conversation.metadata)),
    )  # fmt: skip


def read(db: sqlite3.Connection, conversation_id: str, scope: str) -> StoredConversation | None:
    row = db.execute(
        "SELECT id, scope, created_at, metadata FROM conversations WHERE id = ? AND scope = ?",
        (conversation_id, scope),
    ).fetchone()
    return None if row is None else StoredConversation(row[0], row[1], row[2], json.loads(row[3]))


def set_metadata(
    db: sqlite3.Connection, conversation_id: str, scope: str, metadata: dict[str, str]
) -> StoredConversation | None:
    db.execute(
        "UPDATE conversations SET metadata = ? WHERE id = ? AND scope = ?",
        (json.dumps(metadata), conversation_id, scope),
    )
    return read(db, conversation_id, scope)


def delete(db: sqlite3.Connection, conversation_id: str, scope: str) -> bool:
    cursor = db.execute(
        "DELETE FROM conversations WHERE id = ? AND scope = ?", (conversation_id, scope)
    )
    if cursor.rowcount == 0:
        return False
    db.execute("DELETE FROM conversation_items WHERE conversation_id = ?", (conversation_id,))
    return True


def append(
    db: sqlite3.Connection, conversation_id: str, scope: str, items: list[dict[str, Any]]
) -> None:
    (last,) = db.execute(
        "SELECT coalesce(max(position), -1) FROM conversation_items WHERE conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    db.executemany(
        "INSERT INTO conversation_items VALUES (?, ?, ?, ?, ?, ?)",
        [(conversation_id, last + 1 + n, item["id"], scope, text, len(text))
         for n, (item, text) in enumerate(zip(items, encoded(items), strict=True))],
    )  # fmt: skip


def items(db: sqlite3.Connection, conversation_id: str) -> list[dict[str, Any]]:
    rows = db.execute(
        "SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY position",
        (conversation_id,),
    )
    return [json.loads(row[0]) for row in rows]


def delete_item(db: sqlite3.Connection, conversation_id: str, item_id: str) -> bool:
    cursor = db.execute(
        "DELETE FROM conversation_items WHERE conversation_id = ? AND id = ?",
        (conversation_id, item_id),
    )
    return cursor.rowcount > 0
