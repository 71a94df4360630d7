"""Offloader: worker processes, bounded concurrency, a per-item budget that kills stuck work."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable

import pytest

from gateway.errors import (
    MediaDecodeError,
    MediaTimeout,
    MediaTooLarge,
    MediaWorkerFailed,
    UnsupportedMedia,
)
from gateway.media import stripes
from gateway.media.offload import Offloader, OffloadLimits


def crash() -> None:
    """What a decoder segfault or the OOM killer looks like from outside (without a core)."""
    os.kill(os.getpid(), signal.SIGKILL)


def nap(seconds: float) -> int:
    """A slow item: sleeps, then answers with the worker's pid."""
    time.sleep(seconds)
    return os.getpid()


def refuse(what: str) -> None:
    raise UnsupportedMedia(f"{what} is not welcome", param="p")


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def exited(pid: int) -> bool:
    """Our child ``pid`` has exited and is waitable (what ``Popen.poll`` will see), without
    reaping it. Not a zombie in /proc: a killed process shows Z while its other threads
    (OpenBLAS's) are still being torn down, and is not waitable until they are."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped
        return True


async def kill_mid_item(pool: Offloader, seconds: float) -> tuple[int, int]:
    """Run ``nap(seconds)``, SIGKILL its worker once it has the item; (killed pid, answer)."""
    task = asyncio.create_task(pool.run(nap, seconds))
    await until(lambda: bool(pool.busy_pids))
    (victim,) = pool.busy_pids
    os.kill(victim, signal.SIGKILL)
    return victim, await task


@pytest.fixture(scope="module")
async def offloader() -> AsyncIterator[Offloader]:
    # 2 s per item: room for a killed worker's replacement to start on a loaded machine; the
    # timeout tests run items of 30 s.
    pool = Offloader(OffloadLimits(workers=2, item_timeout_s=2, memory_limit_mb=512))
    await pool.start()
    yield pool
    await pool.aclose()


async def test_runs_in_other_processes(offloader: Offloader) -> None:
    pids = await asyncio.gather(*(offloader.run(os.getpid) for _ in range(4)))
    assert os.getpid() not in pids and len(set(pids)) <= 2
    assert await offloader.run(pow, 3, 4) == 81


async def test_concurrency_is_bounded_by_workers(offloader: Offloader) -> None:
    started = time.perf_counter()
    await asyncio.gather(*(offloader.run(time.sleep, 0.15) for _ in range(4)))
    assert time.perf_counter() - started >= 0.29  # 4 items on 2 workers: two rounds


async def test_job_errors_keep_their_code_and_param(offloader: Offloader) -> None:
    retried = offloader.retried
    with pytest.raises(UnsupportedMedia, match="odd is not welcome") as caught:
        await offloader.run(refuse, "odd")
    assert caught.value.code == "unsupported_media_type" and caught.value.param == "p"
    assert offloader.retried == retried  # a decode error is the media's: not retried


async def test_unexpected_errors_say_nothing_internal(offloader: Offloader) -> None:
    with pytest.raises(MediaDecodeError) as caught:
        await offloader.run(int, "not a number")
    assert caught.value.message == "The media could not be decoded."


async def test_stuck_item_is_abandoned_and_the_pool_recovers(offloader: Offloader) -> None:
    before = offloader.abandoned
    started = time.perf_counter()
    with pytest.raises(MediaTimeout, match=r"Decoding the video took longer than the 2 s"):
        await offloader.run(time.sleep, 30, what="the video")
    assert time.perf_counter() - started < 3.5  # the budget, not the item's 30 s
    assert offloader.abandoned == before + 1
    results = await asyncio.gather(*(offloader.run(pow, 2, n) for n in range(6)))
    assert results == [1, 2, 4, 8, 16, 32]


async def test_an_item_whose_workers_both_die_is_the_servers_fault(offloader: Offloader) -> None:
    """Its worker dies, and so does the one it is retried on: a retryable 503, never a 400."""
    crashed, retried = offloader.crashed, offloader.retried
    with pytest.raises(MediaWorkerFailed, match="not a fault of the request") as caught:
        await offloader.run(crash, what="the image")
    error = caught.value
    assert (error.status_code, error.code, error.error_type) == (
        503,
        "media_worker_failed",
        "server_error",
    )
    assert error.retry_after_s == 1
    assert (offloader.crashed, offloader.retried) == (crashed + 2, retried + 1)
    assert await offloader.run(pow, 2, 5) == 32
    await until(lambda: offloader.idle_workers == 2)  # both replaced


async def test_a_worker_killed_mid_item_is_retried_on_another() -> None:
    # A roomy item budget: the retry's own 0.3 s must not race it on a loaded machine.
    pool = Offloader(OffloadLimits(workers=2, item_timeout_s=3, memory_limit_mb=512))
    await pool.start()
    try:
        victim, answer = await kill_mid_item(pool, 0.3)
        assert answer != victim and answer in pool.pids and victim not in pool.pids
        assert (pool.crashed, pool.retried) == (1, 1)
        await until(lambda: pool.idle_workers == 2)  # the killed one was replaced
    finally:
        await pool.aclose()


async def test_the_retry_waits_for_the_replacement_of_the_only_worker() -> None:
    pool = Offloader(OffloadLimits(workers=1, item_timeout_s=2))
    await pool.start()
    try:
        victim, answer = await kill_mid_item(pool, 0.3)
        assert answer != victim and pool.pids == [answer] and pool.retried == 1
    finally:
        await pool.aclose()


async def test_an_item_survives_every_worker_being_killed_at_once(offloader: Offloader) -> None:
    """Its worker and the idle one die together (an OOM kill, an operator): the retry skips the
    idle one (dead, or still dying and so not answering) and waits for a replacement."""
    await until(lambda: offloader.idle_workers == 2)
    task = asyncio.create_task(offloader.run(nap, 0.3))
    await until(lambda: bool(offloader.busy_pids))
    victims = offloader.pids
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    answer = await task
    assert answer not in victims and answer in offloader.pids
    await until(lambda: offloader.idle_workers == 2)


async def test_dead_idle_workers_are_never_handed_an_item(offloader: Offloader) -> None:
    await until(lambda: offloader.idle_workers == 2)
    victims = offloader.pids
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    await until(lambda: all(exited(pid) for pid in victims))
    crashed, retried = offloader.crashed, offloader.retried
    results = await asyncio.gather(*(offloader.run(pow, 3, n) for n in range(6)))
    assert results == [3**n for n in range(6)]  # none failed ...
    assert offloader.retried == retried  # ... nor needed a retry: found dead at hand-out
    assert offloader.crashed == crashed + 2
    assert not set(victims) & set(offloader.pids)


async def test_a_timeout_is_not_retried(offloader: Offloader) -> None:
    retried, abandoned = offloader.retried, offloader.abandoned
    with pytest.raises(MediaTimeout) as caught:
        await offloader.run(time.sleep, 30)
    assert (caught.value.status_code, caught.value.code) == (400, "media_timeout")
    assert (offloader.retried, offloader.abandoned) == (retried, abandoned + 1)


async def test_memory_limit_refuses_a_bomb(offloader: Offloader) -> None:
    with pytest.raises(MediaTooLarge, match="more memory"):
        await offloader.run(bytearray, 1 << 30)
    assert await offloader.run(len, b"ok") == 2


async def test_a_caller_leaving_recycles_the_worker(offloader: Offloader) -> None:
    task = asyncio.create_task(offloader.run(time.sleep, 0.2))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.3)
    assert offloader.idle_workers == 2


async def test_closed_pool_refuses_work() -> None:
    pool = Offloader(OffloadLimits(workers=1, item_timeout_s=1))
    await pool.start()
    await pool.aclose()
    with pytest.raises(RuntimeError):
        await pool.run(pow, 2, 2)
    with pytest.raises(ValueError):
        Offloader(OffloadLimits(workers=0))


def ask_for_a_pool(threads: int) -> int:
    """A job that sizes its process's stripes' pool, holding its worker a moment (so that
    two such jobs run one in each worker); its worker's pid."""
    stripes.configure(threads)
    time.sleep(0.3)
    return os.getpid()


def pool_size() -> tuple[int, int]:
    time.sleep(0.3)
    return os.getpid(), stripes.stripe_threads()


async def test_media_workers_resize_in_one_thread(offloader: Offloader) -> None:
    """The stripes' pool is the gateway process's (``[decode] stripe_threads``): every job
    in a worker process starts with none, whatever an earlier job there set."""
    asked = await asyncio.gather(*(offloader.run(ask_for_a_pool, 3) for _ in range(2)))
    assert len(set(asked)) == 2  # one in each worker
    sizes = dict(await asyncio.gather(*(offloader.run(pool_size) for _ in range(2))))
    assert sizes == dict.fromkeys(asked, 0)
