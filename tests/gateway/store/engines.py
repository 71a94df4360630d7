"""The two store engines, opened alike for the tests that hold for both."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from gateway.store import PostgresStore, ResponseStore, Retention, SqliteStore, StoredResponse

DAY = 86400.0
Opener = Callable[[Retention], ResponseStore]


def record(
    response_id: str,
    scope: str = "",
    previous: str | None = None,
    created_at: float | None = None,
    text: str = "",
) -> StoredResponse:
    output = [{"type": "message", "role": "assistant", "content": [{"text": text or response_id}]}]
    return StoredResponse(
        id=response_id,
        scope=scope,
        created_at=time.time() if created_at is None else created_at,
        previous_id=previous,
        response={"id": response_id, "object": "response", "output": output},
        input_items=[{"id": f"msg_{response_id}", "type": "message", "content": []}],
    )


def sqlite_opener(folder: Path) -> Opener:
    """Stores on one file in ``folder`` (as several processes on one host would have)."""
    return lambda retention: SqliteStore(folder / "nested" / "responses.sqlite3", retention)


def postgres_opener(url: str) -> Opener:
    """Stores on one database (as several gateways of a deployment would have)."""
    return lambda retention: PostgresStore(url, retention)
