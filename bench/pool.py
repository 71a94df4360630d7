"""The orchestrator's side of the load generator: a pool of worker processes and one phase.

The orchestrator only hands out work and reads counters at the two barriers, so it stays
idle while a phase runs. A phase that breaks (a worker died, a barrier timed out) is
reported as errors and the pool is made usable again for the next one.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing as mp
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from bench.loadgen import BARRIER_SLACK_S, Phase, PhaseResult, worker_main


@dataclass
class PhaseWindow:
    """A phase's merged timings, the measured window's length and the samples taken."""

    result: PhaseResult
    wall_s: float
    before: dict[str, float]
    after: dict[str, float]

    def delta(self, name: str) -> float:
        """CPU seconds ``name``'s processes (keys ``name`` or ``name:pid``) used in the window,
        counting only those alive at both readings."""
        keys = [k for k in self.after if k == name or k.startswith(f"{name}:")]
        return sum(self.after[k] - self.before[k] for k in keys if k in self.before)


def split(total: int, parts: int) -> list[int]:
    """``total`` streams over ``parts`` workers, as evenly as possible."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class WorkerPool:
    """``size`` spawned load-generator processes sharing a barrier with the orchestrator."""

    def __init__(self, size: int) -> None:
        context = mp.get_context("spawn")
        self.size = size
        self.barrier = context.Barrier(size + 1)
        self.results: mp.Queue = context.Queue()
        self.commands = [context.Queue() for _ in range(size)]
        self.processes = [
            context.Process(
                target=worker_main,
                args=(queue, self.results, self.barrier),
                name=f"loadgen-{i}",
                daemon=True,
            )
            for i, queue in enumerate(self.commands)
        ]
        for process in self.processes:
            process.start()

    def close(self) -> None:
        for queue in self.commands:
            queue.put(None)
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()

    async def run(
        self,
        phase: Phase,
        concurrency: int,
        max_requests: int,
        sample: Callable[[], dict[str, float]],
        during: Callable[[threading.Event], None] | None = None,
    ) -> PhaseWindow:
        """Run ``phase`` at ``concurrency`` streams; ``sample`` is read as the window opens
        and closes; ``during`` (optional) runs in a thread until it closes."""
        per_stream = max(1, math.ceil(max_requests / concurrency))
        first = 0
        for queue, share in zip(self.commands, split(concurrency, self.size), strict=True):
            queue.put(
                replace(
                    phase, streams=share, requests_per_stream=per_stream, first=first,
                    total=concurrency,
                )
            )  # fmt: skip
            first += share
        timeout = BARRIER_SLACK_S + phase.duration_s + phase.stagger_s
        broken = False
        stop = threading.Event()
        watcher = None
        try:
            await asyncio.to_thread(self.barrier.wait, timeout)
            before, opened = sample(), time.perf_counter()
            if during is not None:
                watcher = asyncio.create_task(asyncio.to_thread(during, stop))
            await asyncio.to_thread(self.barrier.wait, timeout)
            wall, after = time.perf_counter() - opened, sample()
        except threading.BrokenBarrierError:
            broken, before, after, wall = True, {}, {}, float("nan")
        finally:
            stop.set()
            if watcher is not None:
                await watcher
        merged = PhaseResult()
        for _ in range(self.size):
            merged.merge(await asyncio.to_thread(self.results.get, True, timeout))
        if broken:
            self.barrier.reset()
            merged.fail("phase aborted: a worker failed or a barrier timed out")
        return PhaseWindow(merged, wall, before, after)
