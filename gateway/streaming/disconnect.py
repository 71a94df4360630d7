"""Cancel a request's work when its HTTP client goes away.

Left alone, a handler keeps running until the whole answer is generated, burning GPU time for
nobody. This watches the ASGI channel for ``http.disconnect`` and cancels the work, which
closes the Triton stream; one watch serves a request from arrival to its last byte.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready."""


async def _wait_for_disconnect(receive: Callable[[], Awaitable[MutableMapping[str, Any]]]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class DisconnectWatch:
    """One watcher of the client's channel for a whole request: the work before the response
    (preparing, the first token) and the streamed response itself run under the same watch.
    The work runs in the caller's own task, which the watcher cancels when the client leaves:
    a request pays for one extra task in all, not two per phase."""

    def __init__(self, receive: Callable[[], Awaitable[MutableMapping[str, Any]]]) -> None:
        self._watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
        self._cancelled: asyncio.Task[Any] | None = None

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work``; if the client disconnects first, cancel it, raise ClientDisconnected."""
        task = asyncio.current_task()
        assert task is not None

        def client_left(_: asyncio.Future[None]) -> None:
            if not task.done():
                self._cancelled = task
                task.cancel()

        if self._watcher.done():
            _close_unawaited(work)
            raise ClientDisconnected
        self._watcher.add_done_callback(client_left)
        try:
            return await work
        except asyncio.CancelledError:
            if self._cancelled is not task:
                raise
            self._cancelled = None
            uncancel = getattr(task, "uncancel", None)  # Python 3.11+
            if uncancel is not None:
                uncancel()
            raise ClientDisconnected from None
        finally:
            self._watcher.remove_done_callback(client_left)

    async def close(self) -> None:
        if not self._watcher.done():
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher


def _close_unawaited(work: Awaitable[Any]) -> None:
    close = getattr(work, "close", None)  # a coroutine never started: no warning about it
    if close is not None:
        close()
