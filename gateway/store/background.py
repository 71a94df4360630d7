"""Background responses (``background: true``) this process runs, detached from the requests
that started them."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from gateway.errors import RateLimited


class BackgroundWork:
    """The background responses this process runs (``background: true``), detached from the
    HTTP requests that started them: at most ``limit`` at once (the next is refused with 429),
    and stopped with the process (``stop``: given ``grace_s`` to finish, then cancelled; a
    cancelled run records itself failed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def check_room(self) -> None:
        if len(self.tasks) >= self.limit:
            raise RateLimited(
                f"this gateway runs {self.limit} background responses already; retry later",
                param="background",
            )

    def start(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        self.check_room()
        task = asyncio.create_task(work, name=f"background {key}")
        self.tasks[key] = task
        task.add_done_callback(lambda _: self.tasks.pop(key, None))

    def cancel(self, key: str) -> bool:
        """Cancel the run here, if it runs here (a cancel on another gateway is seen by the
        run's own watch of the store)."""
        task = self.tasks.get(key)
        return task is not None and task.cancel()

    async def stop(self, grace_s: float) -> None:
        running = list(self.tasks.values())
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=grace_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
