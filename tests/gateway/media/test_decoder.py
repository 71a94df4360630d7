"""The in-process decoder: the process pool's budget and error mapping on threads, and an
in-process gateway that decodes media without starting a worker process."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from gateway.errors import MediaDecodeError, MediaTimeout, MediaTooLarge
from gateway.media.decoder import InProcessDecoder
from gateway.media.offload import OffloadLimits
from gateway.media.threads import ThreadLimits
from tests.fakes.app import chat, data_url, http_client, image_part, png, start_gateway
from tests.fakes.triton import FakeTriton


def _thread_name() -> str:
    return threading.current_thread().name


def _out_of_memory() -> None:
    raise MemoryError


def _broken() -> None:
    raise ValueError("a decoder's own error")


def _children() -> set[int]:
    """This process's child processes (Linux)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:  # the thread ended since the folder was listed
            continue
        found.update(int(pid) for pid in children)
    return found


async def test_jobs_run_on_threads_within_the_budget_with_the_pools_errors() -> None:
    decoder = InProcessDecoder(OffloadLimits(workers=1, item_timeout_s=0.2))
    try:
        assert (await decoder.run(_thread_name)).startswith("decode")
        with pytest.raises(MediaTimeout, match=r"the video took longer than the 0\.2 s"):
            await decoder.run(time.sleep, 0.6, what="the video")
        with pytest.raises(MediaTooLarge):
            await decoder.run(_out_of_memory)
        with pytest.raises(MediaDecodeError):
            await decoder.run(_broken)
    finally:
        await decoder.aclose()


async def test_the_thread_lane_is_the_configured_one() -> None:
    limits = OffloadLimits(workers=1, threads=ThreadLimits(threads=0))
    decoder = InProcessDecoder(limits)
    assert decoder.threads is None  # as the process pool: no lane when none is configured
    await decoder.aclose()
    decoder = InProcessDecoder(OffloadLimits(workers=1, threads=ThreadLimits(threads=2)))
    assert decoder.threads is not None and decoder.threads.limits.threads == 2
    await decoder.aclose()


async def test_an_in_process_gateway_decodes_an_image_without_a_worker_process() -> None:
    before = _children()
    gateway = await start_gateway(FakeTriton(), decode={"threads": 0})
    try:
        assert isinstance(gateway.runtime.offload, InProcessDecoder)
        async with http_client(gateway.app) as http:
            content = [image_part(data_url(png())), {"type": "text", "text": "What is it?"}]
            response = await http.post("/v1/chat/completions", json=chat(content))
        assert response.status_code == 200, response.text
        assert _children() - before == set()  # no decode worker was started
    finally:
        await gateway.aclose()
