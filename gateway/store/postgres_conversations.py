"""The Conversations API's rows in the PostgreSQL store: ``mmgw_conversations`` and its items
in ``mmgw_conversation_items``, in the order they were added (``position``); the schema also
holds ``mmgw_response_events``, a streamed background response's events. Each function
runs inside the transaction ``PostgresStore`` opened; an append locks its conversation's row
first (``FOR UPDATE``), so appends from several gateways never interleave."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from gateway.store.base import StoredConversation

SCHEMA = """
CREATE TABLE IF NOT EXISTS mmgw_conversations (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS mmgw_conversation_items (
    conversation_id TEXT NOT NULL REFERENCES mmgw_conversations (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    id TEXT NOT NULL,
    scope TEXT NOT NULL,
    item TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, position)
);
CREATE INDEX IF NOT EXISTS mmgw_conversation_items_by_scope
    ON mmgw_conversation_items (scope) INCLUDE (bytes);
CREATE TABLE IF NOT EXISTS mmgw_response_events (
    response_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);
"""


def encoded(items: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(item, separators=(",", ":")) for item in items]


async def insert(db: asyncpg.Connection, conversation: StoredConversation) -> None:
    await db.execute(
        "INSERT INTO mmgw_conversations VALUES ($1, $2, $3, $4)",
        conversation.id, conversation.scope, conversation.created_at,
        json.dumps(conversation.metadata),
    )  # fmt: skip


async def read(
    db: asyncpg.Connection, conversation_id: str, scope: str, lock: bool = False
) -> StoredConversation | None:
    row = await db.fetchrow(
        "SELECT id, scope, created_at, metadata FROM mmgw_conversations "
        "WHERE id = $1 AND scope = $2" + (" FOR UPDATE" if lock else ""),
        conversation_id, scope,
    )  # fmt: skip
    return None if row is None else StoredConversation(row[0], row[1], row[2], json.loads(row[3]))


async def set_metadata(
    db: asyncpg.Connection, conversation_id: str, scope: str, metadata: dict[str, str]
) -> StoredConversation | None:
    await db.execute(
        "UPDATE mmgw_conversations SET metadata = $1 WHERE id = $2 AND scope = $3",
        json.dumps(metadata), conversation_id, scope,
    )  # fmt: skip
    return await read(db, conversation_id, scope)


async def delete(db: asyncpg.Connection, conversation_id: str, scope: str) -> bool:
    status: str = await db.execute(
        "DELETE FROM mmgw_conversations WHERE id = $1 AND scope = $2", conversation_id, scope
    )  # its items go with it (ON DELETE CASCADE)
    return status != "DELETE 0"


async def append(
    db: asyncpg.Connection, conversation_id: str, scope: str, items: list[dict[str, Any]]
) -> None:
    last = await db.fetchval(
        "SELECT coalesce(max(position), -1) FROM mmgw_conversation_items "
        "WHERE conversation_id = $1",
        conversation_id,
    )
    await db.executemany(
        "INSERT INTO mmgw_conversation_items VALUES ($1, $2, $3, $4, $5, $6)",
        [(conversation_id, last + 1 + n, item["id"], scope, text, len(text))
         for n, (item, text) in enumerate(zip(items, encoded(items), strict=True))],
    )  # fmt: skip


async def items(db: asyncpg.Connection, conversation_id: str) -> list[dict[str, Any]]:
    rows = await db.fetch(
        "SELECT item FROM mmgw_conversation_items WHERE conversation_id = $1 ORDER BY position",
        conversation_id,
    )
    return [json.loads(row[0]) for row in rows]


async def delete_item(db: asyncpg.Connection, conversation_id: str, item_id: str) -> bool:
    status: str = await db.execute(
        "DELETE FROM mmgw_conversation_items WHERE conversation_id = $1 AND id = $2",
        conversation_id, item_id,
    )  # fmt: skip
    return status != "DELETE 0"
