"""The events a session has for its client, waiting for the socket writer.

The session never waits on the client: it puts events here and goes on (a transcription reads
Triton to the end whatever the reader does, so a slow reader never holds Triton work). What
bounds the wait is a count: past ``limit`` unsent events the client is not reading, and the
outbox ends with a close (1008) instead of growing. A close is the last thing it gives.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

POLICY_VIOLATION = 1008
NORMAL = 1000
GOING_AWAY = 1001
SERVICE_RESTART = 1012


@dataclass(frozen=True)
class Close:
    """End the connection with this WebSocket close code and reason."""

    code: int
    reason: str


class Outbox:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._queue: asyncio.Queue[dict[str, Any] | Close] = asyncio.Queue()
        self.closing: Close | None = None
        self.closed = asyncio.Event()  # set with ``closing``: the route stops waiting on a writer

    def put(self, event: dict[str, Any]) -> None:
        if self.closing is not None:
            return
        if self._queue.qsize() >= self.limit:
            self.close(POLICY_VIOLATION, "client is not reading its events")
            return
        self._queue.put_nowait(event)

    def close(self, code: int, reason: str) -> None:
        """No event after this one; the writer closes the socket with ``code``."""
        if self.closing is None:
            self.closing = Close(code, reason[:120])  # a close reason is at most 123 bytes
            self.closed.set()
            self._queue.put_nowait(self.closing)

    async def get(self) -> dict[str, Any] | Close:
        return await self._queue.get()

    def pending(self) -> int:
        return self._queue.qsize()
