"""The thread lane's event-loop path: which small jobs the loop runs itself, and when it declines.

The rest of the lane (which images a thread takes, the budget, slots, error mapping) is tested
with the pipeline in ``tests/gateway/pipeline/test_media_lanes.py``.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time

import numpy as np
import pytest
from PIL import Image

from gateway.errors import MediaDecodeError
from gateway.media.threads import ThreadLane, ThreadLimits


def jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 30)).save(out, "JPEG")
    return out.getvalue()


def thread_of(_: object = None) -> int:
    return threading.get_ident()


def napping_thread(seconds: float) -> int:
    time.sleep(seconds)
    return threading.get_ident()


def test_small_is_by_the_headers_pixels_and_off_at_zero() -> None:
    limits = ThreadLimits(inline_max_pixels=400 * 400)
    assert limits.small(jpeg(336, 336)) and limits.small(jpeg(400, 400))
    assert not limits.small(jpeg(401, 400)) and not limits.small(jpeg(1024, 768))
    assert not limits.small(jpeg(336, 336)[:20])  # no stated size: never small
    assert not ThreadLimits(inline_max_pixels=0).small(jpeg(8, 8))
    # A small picture padded with a megabyte of comment segments: its bytes make it a thread's
    small = jpeg(64, 64)
    comments = (b"\xff\xfe\xff\xff" + bytes(0xFFFD)) * 16
    padded = small[:2] + comments + small[2:]
    assert ThreadLimits().takes(padded) and not ThreadLimits().small(padded)
    assert ThreadLimits().small(small)


async def test_the_loop_runs_a_small_job_only_after_a_thread_ran_its_kind() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=5)
    loop_thread = threading.get_ident()
    first = await lane.run(thread_of, small=True)
    assert first != loop_thread and lane.on_loop == 0  # the first of its kind: a thread
    await asyncio.sleep(0)  # the thread's done-callback frees its slot
    assert await lane.run(thread_of, small=True) == loop_thread
    assert lane.on_loop == 1 and lane.items == 2
    lane.close()


async def test_a_job_not_small_always_goes_to_a_thread() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=5)
    loop_thread = threading.get_ident()
    for _ in range(3):
        assert await lane.run(thread_of) != loop_thread
        await asyncio.sleep(0)
    assert lane.on_loop == 0
    lane.close()


async def test_the_loop_leaves_small_jobs_to_threads_while_one_runs() -> None:
    lane = ThreadLane(ThreadLimits(threads=2), item_timeout_s=5)
    loop_thread = threading.get_ident()
    await lane.run(napping_thread, 0.0, small=True)  # its kind has run in a thread
    await asyncio.sleep(0)
    slow = asyncio.create_task(lane.run(napping_thread, 0.3))
    await asyncio.sleep(0.05)
    assert lane.busy == 1
    # Beside a running thread job the loop would only queue next to it: a thread takes it.
    assert await lane.run(napping_thread, 0.0, small=True) != loop_thread
    assert await slow != loop_thread
    await asyncio.sleep(0)
    assert await lane.run(napping_thread, 0.0, small=True) == loop_thread
    lane.close()


async def test_the_loop_rests_nine_times_as_long_as_its_last_job_took() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=5)
    loop_thread = threading.get_ident()
    await lane.run(napping_thread, 0.0, small=True)
    await asyncio.sleep(0)
    assert await lane.run(napping_thread, 0.02, small=True) == loop_thread
    # 20 ms (or more, on a loaded machine) on the loop: for nine times as long, small jobs go
    # to a thread
    assert await lane.run(napping_thread, 0.0, small=True) != loop_thread
    await asyncio.sleep(0.8)
    assert await lane.run(napping_thread, 0.0, small=True) == loop_thread
    assert lane.on_loop == 2
    lane.close()


async def test_a_job_error_on_the_loop_is_mapped_as_in_a_thread() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=5)
    with pytest.raises(MediaDecodeError, match="could not be decoded"):
        await lane.run(np.frombuffer, b"abc", np.float64, small=True)  # in a thread: first
    await asyncio.sleep(0)
    with pytest.raises(MediaDecodeError, match="could not be decoded"):
        await lane.run(np.frombuffer, b"abc", np.float64, small=True)
    assert lane.on_loop == 1 and lane.busy == 0
    lane.close()


async def test_a_kind_of_job_that_ran_slow_goes_to_a_thread_until_one_runs_fast() -> None:
    """A small job that took over 5 ms (a GPU busy with the model, a loaded host) sends the
    next of its kind to a thread, wherever it ran; a fast run there brings them back."""
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=5)
    loop_thread = threading.get_ident()
    assert await lane.run(napping_thread, 0.02, small=True) != loop_thread  # first: a thread
    await asyncio.sleep(0)
    assert await lane.run(napping_thread, 0.0, small=True) != loop_thread  # 20 ms: slow
    await asyncio.sleep(0)
    assert await lane.run(napping_thread, 0.02, small=True) == loop_thread  # fast before
    await asyncio.sleep(0.3)  # rested, but its last run was slow
    assert await lane.run(napping_thread, 0.0, small=True) != loop_thread
    await asyncio.sleep(0)
    assert await lane.run(napping_thread, 0.0, small=True) == loop_thread
    assert lane.on_loop == 2
    lane.close()
