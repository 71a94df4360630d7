"""Cancel a non-streamed request's work when its HTTP client goes away.

For streamed responses Starlette already cancels the body iterator on disconnect. A
plain JSON response is different: the handler keeps running until the whole answer is
generated, burning GPU time for nobody. This watches the ASGI channel for
``http.disconnect`` and cancels the work, which closes the Triton stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any, TypeVar

T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready."""


async def _wait_for_disconnect(receive: Callable[[], Awaitable[MutableMapping[str, Any]]]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def cancel_on_disconnect(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]], work: Coroutine[Any, Any, T]
) -> T:
    """Run ``work``; if the client disconnects first, cancel it and raise ClientDisconnected."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending
    if task in done:
        return task.result()
    raise ClientDisconnected
