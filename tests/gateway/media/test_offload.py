"""Offloader: worker processes, bounded concurrency, a per-item budget that kills stuck work."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator

import pytest

from gateway.errors import MediaDecodeError, MediaTimeout, MediaTooLarge, UnsupportedMedia
from gateway.media.offload import Offloader, OffloadLimits


def crash() -> None:
    """What a decoder segfault or the OOM killer looks like from outside (without a core)."""
    os.kill(os.getpid(), signal.SIGKILL)


def refuse(what: str) -> None:
    raise UnsupportedMedia(f"{what} is not welcome", param="p")


@pytest.fixture(scope="module")
async def offloader() -> AsyncIterator[Offloader]:
    pool = Offloader(OffloadLimits(workers=2, item_timeout_s=0.5, memory_limit_mb=512))
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
    with pytest.raises(UnsupportedMedia, match="odd is not welcome") as caught:
        await offloader.run(refuse, "odd")
    assert caught.value.code == "unsupported_media_type" and caught.value.param == "p"


async def test_unexpected_errors_say_nothing_internal(offloader: Offloader) -> None:
    with pytest.raises(MediaDecodeError) as caught:
        await offloader.run(int, "not a number")
    assert caught.value.message == "The media could not be decoded."


async def test_stuck_item_is_abandoned_and_the_pool_recovers(offloader: Offloader) -> None:
    before = offloader.abandoned
    started = time.perf_counter()
    with pytest.raises(MediaTimeout, match=r"Decoding the video took longer than the 0\.5 s"):
        await offloader.run(time.sleep, 30, what="the video")
    assert time.perf_counter() - started < 1.5
    assert offloader.abandoned == before + 1
    results = await asyncio.gather(*(offloader.run(pow, 2, n) for n in range(6)))
    assert results == [1, 2, 4, 8, 16, 32]


async def test_crashed_worker_is_replaced(offloader: Offloader) -> None:
    before = offloader.crashed
    with pytest.raises(MediaDecodeError, match="could not be decoded"):
        await offloader.run(crash)
    assert offloader.crashed == before + 1
    assert await offloader.run(pow, 2, 5) == 32


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
