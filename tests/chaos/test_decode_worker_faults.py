"""Chaos: media decoding workers killed under the real app (over the fake Triton).

A decoding worker that dies is the gateway's fault, not the caller's: a request whose worker is
SIGKILLed mid-decode is retried on another worker and still answers 200, workers killed while
idle are never handed a request, and only a request whose retry dies too fails, with a
retryable 503 ``media_worker_failed`` (never a 400 ``invalid_media``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import time
from collections.abc import AsyncIterator, Callable

import httpx
import numpy as np
import pytest
from PIL import Image

from gateway.media.offload import Offloader
from tests.fakes.app import (
    FakeGateway,
    assert_openai_error,
    chat,
    data_url,
    http_client,
    image_part,
    png,
    start_gateway,
)
from tests.fakes.triton import FakeTriton

URL = "/v1/chat/completions"


def large_png() -> bytes:
    """35 megapixels (under the default 40 MP cap): 150 kB on the wire, most of a second to
    decode and resize, so there is time to kill its worker mid-item."""
    out = io.BytesIO()
    Image.fromarray(np.full((5000, 7000, 3), 90, np.uint8)).save(out, "PNG", compress_level=1)
    return out.getvalue()


def ask(image: bytes) -> dict:
    return chat(
        [image_part(data_url(image)), {"type": "text", "text": "What is this?"}], max_tokens=2
    )


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.005)


def exited(pid: int) -> bool:
    """Our child ``pid`` has exited and is waitable (what ``Popen.poll`` will see), without
    reaping it. Not a zombie in /proc: a killed process shows Z while its other threads
    (OpenBLAS's) are still being torn down, and is not waitable until they are."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped
        return True


@pytest.fixture(scope="module")
async def gateway() -> AsyncIterator[FakeGateway]:
    # Every item in a worker process (no thread lane), so the small PNGs below meet the
    # workers this module kills; the lane is tested in tests/gateway/pipeline/test_media_lanes.
    built = await start_gateway(
        FakeTriton(), decode_processes=True, decode={"workers": 2, "threads": 0}
    )
    yield built
    await built.aclose()


@pytest.fixture
async def http(gateway: FakeGateway) -> AsyncIterator[httpx.AsyncClient]:
    gateway.fake.reset()
    await until(lambda: gateway.runtime.offload.idle_workers == 2)  # replacements started
    async with http_client(gateway.app, timeout=60) as client:
        yield client


async def test_worker_killed_mid_decode_the_client_still_gets_200(
    gateway: FakeGateway, http: httpx.AsyncClient
) -> None:
    offload = gateway.runtime.offload
    retried = offload.retried
    request = asyncio.create_task(http.post(URL, json=ask(large_png())))
    await until(lambda: bool(offload.busy_pids))
    (victim,) = offload.busy_pids
    await asyncio.sleep(0.05)  # well into the decode
    os.kill(victim, signal.SIGKILL)
    response = await request
    assert response.status_code == 200, response.text
    assert offload.retried == retried + 1  # it died under the item, which ran again elsewhere
    assert victim not in offload.pids
    assert [r.model for r in gateway.fake.requests] == ["ensemble"]


async def test_after_killing_every_idle_worker_the_next_requests_are_200(
    gateway: FakeGateway, http: httpx.AsyncClient
) -> None:
    offload = gateway.runtime.offload
    victims = offload.pids
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    await until(lambda: all(exited(pid) for pid in victims))
    retried = offload.retried
    for seed in range(3):
        response = await http.post(URL, json=ask(png(seed)))
        assert response.status_code == 200, response.text
    concurrent = await asyncio.gather(*(http.post(URL, json=ask(png(s))) for s in range(4)))
    assert [r.status_code for r in concurrent] == [200] * 4
    assert offload.retried == retried  # dead workers were caught at hand-out, not mid-item
    assert not set(victims) & set(offload.pids)


@contextlib.asynccontextmanager
async def killing_every_busy_worker(offload: Offloader) -> AsyncIterator[list[int]]:
    """While open, SIGKILL each worker as soon as it takes an item; yields the pids killed."""
    killed: list[int] = []

    async def killer() -> None:
        while True:
            for pid in offload.busy_pids:
                if pid not in killed:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            await asyncio.sleep(0.002)

    task = asyncio.create_task(killer())
    try:
        yield killed
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_request_whose_retry_dies_too_is_a_retryable_503(
    gateway: FakeGateway, http: httpx.AsyncClient
) -> None:
    async with killing_every_busy_worker(gateway.runtime.offload) as killed:
        response = await http.post(URL, json=ask(large_png()))
    assert len(killed) == 2
    error = assert_openai_error(response, 503, "media_worker_failed")
    assert "not a fault of the request" in error["message"]
    assert response.headers["retry-after"] == "1"
    assert gateway.fake.requests == []
    await until(lambda: gateway.runtime.offload.idle_workers == 2)
    response = await http.post(URL, json=ask(png(1)))
    assert response.status_code == 200, response.text
