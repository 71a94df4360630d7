"""What the gateway keeps between requests: stored responses (``responses.py``), in SQLite."""

from gateway.store.responses import ResponseStore, Retention, StoredResponse

__all__ = ["ResponseStore", "Retention", "StoredResponse"]
