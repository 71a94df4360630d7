"""Repeat fetches cost nothing: a bounded TTL cache, and single flight for concurrent callers.

Both are keyed by the caller's choice of key (the fetcher uses the URL) and know nothing of
HTTP. ``ContentCache`` holds immutable values whose size the caller states; ``SingleFlight``
runs one task per key however many callers ask at once, so ten requests for one image URL
hit its server once. Neither touches the network nor decodes anything.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from gateway.errors import GatewayError

__all__ = [
    "DEFAULT_CACHE_MAX_BYTES",
    "DEFAULT_CACHE_MAX_ENTRIES",
    "DEFAULT_CACHE_TTL_S",
    "ContentCache",
    "SingleFlight",
]

DEFAULT_CACHE_MAX_ENTRIES = 64
DEFAULT_CACHE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_CACHE_TTL_S = 60.0

V = TypeVar("V")


class ContentCache(Generic[V]):
    """A small LRU with a TTL and a byte budget; values must be immutable.

    One value may take at most a quarter of the byte budget, so a single large item never
    evicts everything else. ``max_entries <= 0`` disables the cache.
    """

    def __init__(
        self,
        max_entries: int = DEFAULT_CACHE_MAX_ENTRIES,
        max_bytes: int = DEFAULT_CACHE_MAX_BYTES,
        ttl_s: float = DEFAULT_CACHE_TTL_S,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_entries, self._max_bytes, self._ttl_s = max_entries, max_bytes, ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, int, V]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> V | None:
        """The value for ``key`` if present and not expired (it becomes most recent)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry[2]

    def put(self, key: str, value: V, size: int) -> None:
        """Keep ``value`` (``size`` bytes) for the TTL, evicting least recent entries."""
        if self._max_entries <= 0 or size > self._max_bytes // 4:
            return
        self._drop(key)
        self._entries[key] = (self._clock() + self._ttl_s, size, value)
        self._bytes += size
        while len(self._entries) > self._max_entries or self._bytes > self._max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[1]


class SingleFlight(Generic[V]):
    """At most one running task per key; every concurrent caller awaits that one task.

    The task is shielded: one caller going away (a client disconnect cancels its request)
    must not cancel the work the others wait on; when the last caller goes away, nobody
    wants the result any more and the work is cancelled. A failure reaches each caller as its
    own copy of the error, so a caller may annotate its copy (``image 2 of 3: ...``) without
    changing what the others see.
    """

    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Task[V]] = {}
        self._callers: dict[asyncio.Task[V], int] = {}

    def __len__(self) -> int:
        return len(self._inflight)

    async def run(self, key: str, work: Callable[[], Awaitable[V]]) -> V:
        """The result of ``work()``, started now unless a task for ``key`` is already running."""
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(work())
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        self._callers[task] = self._callers.get(task, 0) + 1
        try:
            return await asyncio.shield(task)
        except GatewayError as exc:
            raise copy.copy(exc) from exc
        finally:
            left = self._callers[task] - 1
            if left:
                self._callers[task] = left
            else:
                del self._callers[task]
                if not task.done():
                    task.cancel()  # the last caller left: nobody waits for this work

    def cancel_all(self) -> None:
        """Cancel every running task (shutdown)."""
        for task in list(self._inflight.values()):
            task.cancel()

    def _forget(self, key: str, task: asyncio.Task[V]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # retrieved here, so a task nobody awaits any more logs nothing
