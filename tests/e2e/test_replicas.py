"""Three co-launched reference replicas (``[embedded] replicas = 3``) behind the gateway,
through the OpenAI SDK: KV reuse kept by image affinity (and lost by round robin), and a
replica killed under load with no request lost and its return to the rotation.

Only reference_llava is served (one small model per replica: the test machine is small); the
full-size workload is ``python -m bench replicas`` (its figures are in bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from fastapi import FastAPI
from openai import AsyncOpenAI

from bench.replicas import MODEL, Workload, compare, image_url, serving, table
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.triton.replicas import ReplicaSet

pytestmark = pytest.mark.e2e

REPLICAS = 3


@pytest.fixture(scope="module")
async def owned(reference_cache: Path) -> AsyncIterator[tuple[str, FastAPI]]:
    """A gateway that launches and supervises its own three replicas."""
    settings = Settings(
        models=[
            ServedModel(id=MODEL, family="llava", triton_model="reference_llava", end_id="server")
        ],
        embedded=EmbeddedSettings(
            replicas=REPLICAS, device="cpu", cache_dir=reference_cache, model_load_threads=1
        ),
        upstream={"ready_check_interval_s": 0.5, "eject_backoff_s": 0.5},
        decode={"workers": 1},
    )
    async with serving(settings) as served:
        yield served


def replica_set(app: FastAPI) -> ReplicaSet:
    [replicas] = app.state.runtime.replica_sets
    return replicas


async def test_the_embedded_replicas_are_one_replica_set(owned: tuple[str, FastAPI]) -> None:
    _, app = owned
    servers = app.state.runtime.embedded.servers
    assert len(servers) == REPLICAS and len({s.grpc_port for s in servers}) == REPLICAS
    assert sorted(replica_set(app).replicas) == sorted(s.grpc_url for s in servers)


async def test_affinity_keeps_the_reuse_of_one_replica_and_round_robin_loses_it(
    owned: tuple[str, FastAPI],
) -> None:
    _, app = owned
    urls = [server.grpc_url for server in app.state.runtime.embedded.servers]
    # One at a time: placement alone decides reuse (the bench also runs it concurrently).
    one, affinity, round_robin = await compare(urls, Workload(images=8, repeats=4, concurrency=1))
    print("\n" + table([one, affinity, round_robin]))
    assert one.ok == affinity.ok == round_robin.ok == 32
    assert one.cached_tokens >= 8 * 3 * 576  # every repeat reuses its image's blocks
    assert affinity.cached_tokens >= 0.95 * one.cached_tokens
    assert round_robin.cached_tokens < 0.8 * one.cached_tokens


async def test_a_killed_replica_loses_no_request_and_rejoins(
    owned: tuple[str, FastAPI], caplog: pytest.LogCaptureFixture
) -> None:
    base_url, app = owned
    replicas = replica_set(app)
    server = app.state.runtime.embedded.servers[0]
    victim = replicas.replicas[server.grpc_url]
    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=120)
    images = [image_url(5000 + i) for i in range(12)]
    outcomes: list[Any] = []
    stop = asyncio.Event()

    async def user(first: int) -> None:
        index = first
        while not stop.is_set():
            content = [
                {"type": "image_url", "image_url": {"url": images[index % len(images)]}},
                {"type": "text", "text": f"Question {index}?"},
            ]
            try:
                await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": content}], max_tokens=4
                )
                outcomes.append(200)
            except openai.APIStatusError as exc:
                outcomes.append((exc.status_code, exc.body))
            index += 1

    caplog.set_level(logging.WARNING, logger="gateway.triton.replicas.replica_set")
    users = [asyncio.create_task(user(first)) for first in range(3)]
    try:
        # Killed with a call of its own in flight: that call must be retried (or, had it
        # streamed already, fail cleanly), never lost.
        await until(lambda: victim.requests >= 3 and victim.in_flight > 0, 60, every_s=0.002)
        os.kill(server.pid, signal.SIGKILL)
        await until(lambda: server.restarts == 1 and server.ready, 240)
        await until(lambda: victim.health.available(), 30)
        back = victim.requests
        await until(lambda: victim.requests >= back + 3, 60)  # routing returns to it
    finally:
        stop.set()
        await asyncio.gather(*users)
        await client.close()
    mid_stream = [r for r in caplog.records if "mid-stream" in r.getMessage()]
    retried = [r for r in caplog.records if "retrying on" in r.getMessage()]
    failures = [o for o in outcomes if o != 200]
    print(
        f"\n{len(outcomes)} requests, {len(failures)} failed, {len(retried)} retried on another "
        f"replica, {len(mid_stream)} cut mid-stream; the killed replica: {victim.requests} "
        f"calls, {victim.health.ejections} ejections, {victim.retried} retried elsewhere"
    )
    assert len(outcomes) >= 20
    assert victim.health.ejections >= 1  # its calls in flight saw it die
    assert len(failures) <= len(mid_stream)  # only a call already streaming may fail
    for status, body in failures:
        assert status == 503 and body["code"] == "upstream_unavailable", body


async def until(condition: Callable[[], bool], timeout: float, every_s: float = 0.1) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(every_s)

    await asyncio.wait_for(poll(), timeout)
