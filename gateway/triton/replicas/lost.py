"""A call's line to the probe of the replica it waits on.

A hung replica (a stopped process) answers neither the call nor its readiness probe. When the
probe fails, the set ends every call waiting there at once (``Replica.waiting``), instead of
leaving each to its silence limits: ``lose()`` cancels the task reading the call, marked, so
``ReplicaSet.stream`` can tell that cancellation from the caller's own and send the call to the
next replica when nothing had come back yet.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from gateway.errors import UpstreamUnavailable

if TYPE_CHECKING:
    from gateway.triton.replicas.replica_set import Replica


class LostWatch:
    """One call's line to its replica's probe: a failed probe cancels the task reading the
    call, marked, so the set can tell that cancellation from the caller's own."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.task = asyncio.current_task()
        self.fired = False
        replica.waiting.add(self.lose)
        if not replica.health.probe_ok:  # lost since the call chose it
            self.lose()

    def lose(self) -> None:
        if not self.fired and self.task is not None and not self.task.done():
            self.fired = True
            self.task.cancel()

    def take_back(self) -> None:
        """The cancellation was ours: the task goes on (to a retry, or to raise an error)."""
        uncancel = getattr(self.task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()

    def error(self) -> UpstreamUnavailable:
        return UpstreamUnavailable(
            f"Triton replica {self.replica.name} stopped answering its readiness probe"
        )

    def close(self) -> None:
        self.replica.waiting.discard(self.lose)
