"""What the pipeline needs of a decoder: ``run`` a job within the item budget, an optional
thread lane for bounded still images, and ``aclose``.

``offload.Offloader`` (worker processes) is the one ``mmgw serve`` runs: only a process can be
killed when a decoder is stuck, contain a decoder crash, and cap a decompression bomb's
memory. ``InProcessDecoder`` runs every job on threads of this process, under the same budget
and the same error mapping: an in-process test of the HTTP routes starts no worker process for
it (a fresh interpreter each, about half a second of CPU on this machine).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from gateway.media.offload import OffloadLimits
from gateway.media.threads import ThreadLane, ThreadLimits

__all__ = ["Decoder", "InProcessDecoder"]

T = TypeVar("T")


class Decoder(Protocol):
    """Runs decoding jobs (module-level functions of untrusted bytes) within a time budget."""

    @property
    def threads(self) -> ThreadLane | None: ...  # the lane for images ``limits.takes``

    async def run(
        self,
        function: Callable[..., T],
        *args: Any,
        what: str = "the media",
        on_wait: Callable[[float], None] | None = None,
        timeout_s: float | None = None,  # this item's own budget; None: the pool's
    ) -> T: ...

    async def aclose(self) -> None: ...


class InProcessDecoder:
    """Every job on threads: ``threads`` as the configured lane, the rest on a lane of
    ``limits.workers`` threads standing in for the worker processes (no kill, no memory cap:
    for tests, never for a served gateway)."""

    def __init__(self, limits: OffloadLimits | None = None) -> None:
        self.limits = limits or OffloadLimits()
        lane = self.limits.threads
        self._threads = ThreadLane(lane, self.limits.item_timeout_s) if lane.threads else None
        workers = ThreadLimits(threads=self.limits.workers)
        self._workers = ThreadLane(workers, self.limits.item_timeout_s)
        self.run = self._workers.run  # the workers' stand-in: a lane of its own

    @property
    def threads(self) -> ThreadLane | None:
        return self._threads

    async def aclose(self) -> None:
        self._workers.close()
        if self._threads is not None:
            self._threads.close()
