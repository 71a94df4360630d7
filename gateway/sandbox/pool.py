"""A small pool of sandboxed worker processes; ``run(function, *args)`` runs one job in one.

Why processes: a job here is handed input nobody vetted (a client's grammar), and the native
code it calls can recurse until the stack overflows (SIGSEGV, which no ``except`` catches),
loop for seconds without releasing the GIL, or allocate without bound. In a child process each
of those ends one child: a crash is ``SandboxCrashed``, a job over its time budget
``SandboxTimeout`` (its child is killed), and the caller decides what that means for its
request. A failed job is never retried: the input is what killed it, so a retry would only kill
a second child.

Children start on first use, not with the gateway (a gateway whose clients never send a guide
runs none), up to ``workers`` of them; a dead or killed child's slot is filled again on the next
job. Each child runs one job at a time; callers queue for a free one, and the budget counts from
hand-over, not from the wait. Functions and arguments travel by pickle: jobs are module-level
functions of plain data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gateway.sandbox._child import Child, Reply, spawn_child

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxLimits:
    """How many children, how long one job may take, and what each child may map."""

    workers: int = 2
    timeout_s: float = 5.0
    memory_mb: int | None = 1024  # RLIMIT_AS per child; None: unlimited
    stack_mb: int | None = 8  # RLIMIT_STACK per child; None: as inherited


class SandboxTimeout(Exception):
    """The job ran past its budget; its child was killed."""


class SandboxCrashed(Exception):
    """The child died under the job (``how``: "SIGSEGV", "exit 1"...)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class SandboxJobFailed(Exception):
    """The job raised; the message is its exception's text, cut short."""


class SandboxPool:
    """Up to ``limits.workers`` children, started on demand. ``crashed`` and ``timed_out``
    count the children lost to jobs; ``started`` counts children ever started."""

    def __init__(self, limits: SandboxLimits, *, preload: Sequence[str] = ()) -> None:
        if limits.workers < 1 or limits.timeout_s <= 0:
            raise ValueError("need at least one worker and a positive time budget")
        self.limits = limits
        self._preload = tuple(preload)
        self._threads = ThreadPoolExecutor(2 * limits.workers, thread_name_prefix="sandbox")
        self._idle: list[Child] = []
        self._children: set[Child] = set()
        self._free: asyncio.Semaphore | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closing = False
        self.crashed = 0
        self.timed_out = 0
        self.started = 0

    @property
    def pids(self) -> list[int]:
        """The children's process ids, idle and busy (for operators and tests)."""
        return sorted(child.pid for child in self._children)

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in a child, within the budget. Raises SandboxTimeout,
        SandboxCrashed or SandboxJobFailed; the gateway's process is never at risk."""
        if self._closing:
            raise RuntimeError("the sandbox pool is closed")
        if self._free is None:
            self._free = asyncio.Semaphore(self.limits.workers)
        await self._free.acquire()  # released when the child is free again, even if we leave
        try:
            child = await self._take()
        except BaseException:
            self._free.release()
            raise
        ok, value = await self._attempt(child, function, args)
        if ok:
            return value
        raise SandboxJobFailed(value)

    async def _take(self) -> Child:
        """An idle child that is alive, or a new one (a slot is held, so there is room)."""
        while self._idle:
            child = self._idle.pop()
            if child.alive():
                return child
            self._discard(child)  # died while idle (an operator, the OOM killer)
        # Started from the loop's default executor, whose threads live as long as the loop: the
        # child's PR_SET_PDEATHSIG follows the thread that started it, not the process.
        child = await asyncio.to_thread(spawn_child, self._preload, self.limits.memory_mb,
                                        self.limits.stack_mb)  # fmt: skip
        self._children.add(child)
        self.started += 1
        return child

    async def _attempt(
        self, child: Child, function: Callable[..., Any], args: tuple[Any, ...]
    ) -> Reply:
        """One job on ``child``; the slot is given back when the child is free (or dead)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.timeout_s
        future = loop.run_in_executor(self._threads, child.call, function, args)
        future.add_done_callback(_retrieve)  # a killed child's EOFError is expected
        try:
            reply: Reply = await asyncio.wait_for(asyncio.shield(future), self.limits.timeout_s)
        except asyncio.TimeoutError:
            self.timed_out += 1
            self._forget(child)
            raise SandboxTimeout(f"over {self.limits.timeout_s:g} s") from None
        except asyncio.CancelledError:  # the caller left: the slot stays held until it settles
            self._in_background(self._settle(child, future, deadline))
            raise
        except (EOFError, OSError):
            self.crashed += 1
            how = await loop.run_in_executor(self._threads, child.death)
            log.warning("sandbox child %d died under its job (%s); it is replaced", child.pid, how)
            self._forget(child)
            raise SandboxCrashed(how) from None
        self._idle.append(child)
        self._release()
        return reply

    async def _settle(self, child: Child, future: asyncio.Future[Reply], deadline: float) -> None:
        """After a caller left: the child is idle again when its job ends, killed at deadline."""
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            await asyncio.wait_for(asyncio.shield(future), remaining)
        except (asyncio.TimeoutError, EOFError, OSError):
            self._forget(child)
            return
        self._idle.append(child)
        self._release()

    def _release(self) -> None:
        assert self._free is not None
        self._free.release()

    def _forget(self, child: Child) -> None:
        """Kill ``child`` (off the event loop) and give its slot back: a new child takes it
        on demand."""
        self._discard(child)
        self._release()

    def _discard(self, child: Child) -> None:
        self._children.discard(child)
        self._in_background(asyncio.to_thread(child.kill))

    def _in_background(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Kill every child (a job still running is of no use to anyone now)."""
        self._closing = True
        children, self._children, self._idle = list(self._children), set(), []
        for child in children:
            await asyncio.to_thread(child.kill)
        for task in list(self._background):
            await asyncio.gather(task, return_exceptions=True)
        await asyncio.to_thread(self._threads.shutdown, wait=True)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
