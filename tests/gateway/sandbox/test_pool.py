"""The sandbox pool: a job that crashes its process, runs past its budget, eats memory or
recurses past its stack ends that child only; the pool goes on with a fresh one, retries
nothing, and starts no child before the first job."""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from collections.abc import AsyncIterator

import pytest

from gateway.sandbox import SandboxCrashed, SandboxLimits, SandboxPool, SandboxTimeout
from gateway.sandbox.pool import SandboxJobFailed


def segfault() -> None:
    """What a native stack overflow looks like from outside: SIGSEGV, no ``except`` catches."""
    ctypes.string_at(0)


def nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def allocate(megabytes: int) -> int:
    return len(bytearray(megabytes * 1024 * 1024))


def fail(what: str) -> None:
    raise ValueError(what * 1000)


def marked_segfault(folder: str) -> None:
    """Leaves a file per call (to count tries), then crashes."""
    with open(os.path.join(folder, f"{os.getpid()}-{time.monotonic_ns()}"), "w"):
        pass
    segfault()


@pytest.fixture
async def pool() -> AsyncIterator[SandboxPool]:
    sandbox = SandboxPool(SandboxLimits(workers=2, timeout_s=1.0, memory_mb=512, stack_mb=8))
    yield sandbox
    await sandbox.aclose()


async def test_no_child_runs_before_the_first_job(pool: SandboxPool) -> None:
    assert pool.pids == [] and pool.started == 0
    pid = await pool.run(os.getpid)
    assert pool.pids == [pid] and pid != os.getpid()
    assert await pool.run(os.getpid) == pid  # the same child, reused


async def test_a_crash_ends_one_child_and_is_never_retried(pool: SandboxPool, tmp_path) -> None:
    with pytest.raises(SandboxCrashed) as crashed:
        await pool.run(marked_segfault, str(tmp_path))
    assert crashed.value.how == "SIGSEGV"
    assert len(os.listdir(tmp_path)) == 1  # one try: the input is what killed it
    assert pool.crashed == 1
    assert await pool.run(nap, 0) != os.getpid()  # the pool goes on, in a fresh child


async def test_a_job_over_its_budget_is_killed(pool: SandboxPool) -> None:
    first = await pool.run(nap, 0)
    started = time.monotonic()
    with pytest.raises(SandboxTimeout):
        await pool.run(nap, 30)
    assert time.monotonic() - started < 10  # the budget is 1 s; loose for a loaded machine
    assert pool.timed_out == 1
    deadline = time.monotonic() + 10
    while first in pool.pids or _alive(first):
        assert time.monotonic() < deadline, "the timed-out child was not killed"
        await asyncio.sleep(0.05)


async def test_memory_and_exceptions_come_back_as_failures(pool: SandboxPool) -> None:
    with pytest.raises(SandboxJobFailed, match="MemoryError"):
        await pool.run(allocate, 2048)  # over the 512 MB address-space cap
    with pytest.raises(SandboxJobFailed) as failed:
        await pool.run(fail, "x")
    assert len(str(failed.value)) <= 500  # the job's text is cut short
    assert await pool.run(allocate, 16) == 16 * 1024 * 1024


async def test_children_are_bounded_and_a_caller_leaving_keeps_its_slot(
    pool: SandboxPool,
) -> None:
    leaving = asyncio.create_task(pool.run(nap, 0.5))
    await asyncio.sleep(0.3)
    leaving.cancel()
    pids = await asyncio.gather(*(pool.run(nap, 0.2) for _ in range(6)))
    assert len(set(pids)) <= 2 and len(pool.pids) <= 2


def _alive(pid: int) -> bool:
    try:
        waited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return waited is None
