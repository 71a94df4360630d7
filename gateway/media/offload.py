"""Run CPU-heavy decoding of untrusted bytes in worker processes, each item under a time budget.

Why processes, not threads: a thread cannot be stopped. A decoder stuck in C (a PIL or FFmpeg
loop on a crafted file) would keep its thread, its CPU and, with bounded slots, its slot
forever; after a few such files nothing decodes any more. A worker process can be killed: an
item over its budget is abandoned by killing its worker (the request gets ``media_timeout``)
and a fresh worker takes the slot, so the service keeps serving. Processes also contain what
a thread cannot: a decoder crash (the usual shape of image and video CVEs) ends one worker,
not the gateway, and an address-space limit turns a decompression bomb that slipped past the
header checks into one refused item instead of an out-of-memory kill of the whole service.
The cost is a copy of the bytes in and the array out (a pipe, about 1 ms per MB), a few idle
processes, and half a second to start a replacement (a fresh interpreter: never ``fork`` of the
threaded gateway, and not ``multiprocessing``'s spawn, which re-imports the main module).

Concurrency is bounded by the number of workers: each runs one item at a time, and callers
queue for a free one. The budget counts from hand-over to a worker, not the wait before.

A worker's death is the gateway's fault, not the caller's: one found dead in the idle queue
(an operator, the OOM killer) is replaced, never handed out; an item whose worker dies under it
goes once more to another (with a budget of its own, so at most two budgets in all), and only
if that one dies too does it fail, with a retryable 503 ``MediaWorkerFailed``. A timeout is
not retried: the item used its budget, and its worker is killed as before.
Functions and arguments travel by pickle, so jobs are module-level functions. What a job does
is the caller's business; this module knows no media format.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from gateway.errors import (
    MediaTimeout,
    MediaWorkerFailed,
)
from gateway.media import limits
from gateway.media._worker import Reply as _Reply
from gateway.media._worker import Worker as _Worker
from gateway.media._worker import spawn_worker
from gateway.media.threads import ThreadLane, ThreadLimits

__all__ = ["DEFAULT_ITEM_TIMEOUT_S", "DEFAULT_MEMORY_LIMIT_MB", "OffloadLimits", "Offloader"]

log = logging.getLogger(__name__)

DEFAULT_WORKERS = limits.DEFAULT_DECODE_WORKERS
DEFAULT_ITEM_TIMEOUT_S = limits.DEFAULT_DECODE_TIMEOUT_S
DEFAULT_MEMORY_LIMIT_MB = limits.DEFAULT_DECODE_MEMORY_MB

T = TypeVar("T")
_PING_TIMEOUT_S = 2.0  # an idle worker answers in well under a millisecond


@dataclass(frozen=True)
class OffloadLimits:
    """How many items decode at once, how long each may take, and how much memory a worker
    may map (None: unlimited); ``threads``: the thread lane for bounded still images."""

    workers: int = DEFAULT_WORKERS
    item_timeout_s: float = DEFAULT_ITEM_TIMEOUT_S
    memory_limit_mb: int | None = DEFAULT_MEMORY_LIMIT_MB
    threads: ThreadLimits = field(default_factory=ThreadLimits)


class Offloader:
    """A fixed pool of worker processes; ``run(function, *args)`` runs one item on one of them.

    Build it in the app's lifespan, ``await start()``, and ``await aclose()`` at shutdown.
    ``preload`` names modules each worker imports at start, so its first item is not slowed
    by imports.
    ``abandoned`` counts items killed for their budget, ``crashed`` workers that died (mid-item
    or idle), ``retried`` items handed to a second worker after their first one died.
    ``threads`` is the thread lane (``media/threads.py``; None when ``limits.threads`` has
    none): the caller decides, by ``threads.limits.takes(data)``, which lane an item takes.
    """

    def __init__(self, limits: OffloadLimits | None = None, *, preload: Sequence[str] = ()) -> None:
        self.limits = limits or OffloadLimits()
        if self.limits.workers < 1 or self.limits.item_timeout_s <= 0:
            raise ValueError("need at least one worker and a positive time budget")
        self._preload = tuple(preload)
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._threads = ThreadPoolExecutor(2 * self.limits.workers, thread_name_prefix="offload")
        lane = self.limits.threads
        self.threads = ThreadLane(lane, self.limits.item_timeout_s) if lane.threads else None
        self._background: set[asyncio.Task[None]] = set()
        self._workers: set[_Worker] = set()
        self._busy: set[_Worker] = set()
        self._started = False
        self._closing = False
        self.abandoned = 0
        self.crashed = 0
        self.retried = 0

    async def start(self) -> None:
        """Start every worker, concurrently, and wait until each answers (imports done)."""
        if self._started:
            return
        self._started = True
        spawned = [asyncio.to_thread(self._spawn_ready) for _ in range(self.limits.workers)]
        for worker in await asyncio.gather(*spawned):
            self._idle.put_nowait(worker)

    async def run(
        self,
        function: Callable[..., T],
        *args: Any,
        what: str = "the media",
        on_wait: Callable[[float], None] | None = None,
        timeout_s: float | None = None,
    ) -> T:
        """``function(*args)`` in a worker, within the item budget (``timeout_s`` when given:
        a job with a budget of its own, such as a PDF's render).

        Raises the job's own GatewayError, MediaTimeout when the budget runs out (the worker is
        killed and replaced), or MediaWorkerFailed when the worker dies mid-item and so does
        the one the item is then retried on. ``what`` names the item in the timeout message;
        ``on_wait`` hears how long the item queued.
        """
        if self._closing:
            raise RuntimeError("the offloader is closed")
        await self.start()
        queued = time.perf_counter()
        worker = await self._take()
        if on_wait is not None:
            on_wait(time.perf_counter() - queued)
        try:
            ok, value = await self._attempt(worker, function, args, what, timeout_s)
        except _WorkerDied as died:
            if self._closing:
                raise _worker_failed(what) from None
            self.retried += 1
            log.warning("media worker %d died mid-item; retrying %s on another", died.pid, what)
            try:
                # Workers often die together (the OOM killer, an operator): make sure of this one.
                retry_worker = await self._take(ping=True)
                ok, value = await self._attempt(retry_worker, function, args, what, timeout_s)
            except _WorkerDied as again:
                log.error("media worker %d died mid-item too (the retry of %s)", again.pid, what)
                raise _worker_failed(what) from None
        if ok:
            return cast(T, value)  # the job's own result, through a pickle or a thread
        raise value

    async def _attempt(
        self,
        worker: _Worker,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        what: str,
        timeout_s: float | None = None,
    ) -> _Reply:
        """One hand-over of the item to ``worker``, under its own budget. Raises MediaTimeout
        (worker killed and replaced) or _WorkerDied (worker replaced)."""
        loop = asyncio.get_running_loop()
        budget = timeout_s if timeout_s is not None else self.limits.item_timeout_s
        deadline = loop.time() + budget
        self._busy.add(worker)
        future = loop.run_in_executor(self._threads, worker.call, function, args)
        future.add_done_callback(_retrieve)  # an abandoned item's EOFError is expected
        try:
            reply = await asyncio.wait_for(asyncio.shield(future), budget)
        except asyncio.TimeoutError:
            self.abandoned += 1
            self._replace(worker)
            raise MediaTimeout(
                f"Decoding {what} took longer than the {budget:g} s this server allows per item."
            ) from None
        except asyncio.CancelledError:  # the caller left: finish (or kill) in the background
            self._spawn_task(self._settle(worker, future, deadline))
            raise
        except (EOFError, OSError):
            self.crashed += 1
            self._replace(worker)
            raise _WorkerDied(worker) from None
        self._release(worker)
        return reply

    async def _take(self, *, ping: bool = False) -> _Worker:
        """The next idle worker that is alive; one found dead is counted and replaced, never
        handed an item. (One killed a moment ago may still be tearing down its threads and look
        alive: its item then goes to the retry, which also ``ping``s the worker it takes.)"""
        while True:
            worker = await self._idle.get()
            if worker.alive() and (not ping or await self._answers(worker)):
                return worker
            self.crashed += 1
            log.warning(
                "media worker %d died while idle (exit %s); replacing it",
                worker.pid,
                worker.process.poll(),
            )
            self._replace(worker)

    async def _answers(self, worker: _Worker) -> bool:
        """Whether ``worker`` answers a round trip (its pid) in time."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._threads, worker.call, os.getpid, ())
        future.add_done_callback(_retrieve)
        try:
            reply = await asyncio.wait_for(asyncio.shield(future), _PING_TIMEOUT_S)
        except (asyncio.TimeoutError, EOFError, OSError):
            return False
        except asyncio.CancelledError:  # the caller left: recycle the worker when it answers
            self._spawn_task(self._settle(worker, future, loop.time() + _PING_TIMEOUT_S))
            raise
        return reply == (True, worker.pid)

    async def aclose(self) -> None:
        """Kill every worker (an item still running is of no use to anyone now)."""
        self._closing = True
        for task in list(self._background):
            task.cancel()
        workers, self._workers = list(self._workers), set()
        for worker in workers:
            await asyncio.to_thread(worker.kill)
        await asyncio.to_thread(self._threads.shutdown, wait=True)
        if self.threads is not None:
            self.threads.close()

    @property
    def idle_workers(self) -> int:
        return self._idle.qsize()

    @property
    def pids(self) -> list[int]:
        """The process ids of the pool's workers, idle and busy (for operators and tests)."""
        return sorted(worker.pid for worker in self._workers)

    @property
    def busy_pids(self) -> list[int]:
        """The process ids of the workers running an item now."""
        return sorted(worker.pid for worker in self._busy)

    def _spawn_ready(self) -> _Worker:
        """A started worker that has answered once (blocking: call it in a thread)."""
        worker = self._spawn()
        try:
            worker.call(os.getpid, ())
        except BaseException:
            self._workers.discard(worker)
            worker.kill()
            raise
        return worker

    def _spawn(self) -> _Worker:
        """Start one worker and count it (blocking: call it in a thread)."""
        worker = spawn_worker(self._preload, self.limits.memory_limit_mb)
        self._workers.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker`` and put a fresh one in its slot, both off the event loop."""
        self._workers.discard(worker)
        self._busy.discard(worker)
        self._spawn_task(self._kill_and_respawn(worker))

    def _release(self, worker: _Worker) -> None:
        """``worker`` finished its item and is idle again."""
        self._busy.discard(worker)
        self._idle.put_nowait(worker)

    async def _kill_and_respawn(self, worker: _Worker) -> None:
        """Reap ``worker``; start its successor, retrying (with backoff) if a start fails, so
        a transient failure (no memory, no file descriptors) does not lose the slot."""
        await asyncio.to_thread(worker.kill)
        delay = 0.5
        while not self._closing:
            try:
                self._idle.put_nowait(await asyncio.to_thread(self._spawn_ready))
                return
            except (OSError, EOFError) as exc:
                log.error("media worker failed to start (%s); retrying in %g s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 30.0)

    async def _settle(
        self, worker: _Worker, future: asyncio.Future[_Reply], deadline: float
    ) -> None:
        """After a caller left: recycle the worker when its item ends, or kill it at deadline."""
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            await asyncio.wait_for(asyncio.shield(future), remaining)
        except asyncio.TimeoutError:
            self.abandoned += 1
            self._replace(worker)
            return
        except (EOFError, OSError):
            self.crashed += 1
            self._replace(worker)
            return
        self._release(worker)

    def _spawn_task(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _WorkerDied(Exception):
    """The worker running an item exited before replying (already counted and replaced)."""

    def __init__(self, worker: _Worker) -> None:
        super().__init__(worker.pid)
        self.pid = worker.pid


def _worker_failed(what: str) -> MediaWorkerFailed:
    return MediaWorkerFailed(
        f"Decoding {what} failed: this server's decoding worker stopped unexpectedly (and so did "
        "the one it was retried on). This is not a fault of the request; retry it."
    )


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
