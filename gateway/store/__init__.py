"""What the gateway keeps between requests: stored responses, behind one protocol
(``base.ResponseStore``) with two engines: ``SqliteStore`` (one file, the default) and
``PostgresStore`` (one database shared by every gateway)."""

from gateway.store.base import ResponseStore, Retention, StoredConversation, StoredResponse
from gateway.store.postgres import PostgresStore
from gateway.store.sqlite import SqliteStore

__all__ = [
    "PostgresStore",
    "ResponseStore",
    "Retention",
    "SqliteStore",
    "StoredConversation",
    "StoredResponse",
]
