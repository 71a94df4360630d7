"""A real tritonserver crashing under a client: the call in flight fails fast, nothing of the
dead server stays on the machine, and the watchdog brings it back.

The server is the project's ``EmbeddedTriton`` over two copies of the no-compute bench fixture
(``server_repo/bench_models/loadgen_ensemble``; one cheap Python stub each): one paced (a token
every 10 ms), one flooding (no pause between tokens). The client is the gateway's own
``TritonClient``. A stub that is sending its first tokens as fast as it can when its server
dies gets stuck for ever (every thread waits on a futex): that is how Triton 2.51 leaks stubs
and their shared memory. An idle or paced stub notices its parent's death and exits by itself.

Each test kills the running ``tritonserver`` process only (as a crash does, not its process
group) while requests are in flight, then checks /proc and /dev/shm for the stubs and regions
captured before the kill. Times are printed (``pytest -s``) and bounded generously: the
machine is small and shared.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient

from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.errors import UpstreamFailed, UpstreamUnavailable
from gateway.triton.client import TritonClient
from gateway.triton.embedded import EmbeddedTriton
from tests.conftest import REPO_ROOT
from tests.live_gateway import serving
from tests.triton_procs import ServerSnapshot

BENCH_REPOSITORY = REPO_ROOT / "server_repo" / "bench_models"
MODEL = "loadgen_ensemble"
FLOOD = "loadgen_flood"
# Bounds, generous for a loaded 2-core machine: the crash must reach the client promptly,
# the restart may wait behind other test runs.
CLIENT_ERROR_WITHIN_S = 20.0
RESTART_WITHIN_S = 120.0
LEFTOVERS_GONE_WITHIN_S = 5.0

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bench fixture as is, and a copy of it that sends its tokens without pause."""
    root = tmp_path_factory.mktemp("chaos-models")
    shutil.copytree(BENCH_REPOSITORY / MODEL, root / MODEL)
    shutil.copytree(BENCH_REPOSITORY / MODEL, root / FLOOD)
    config = root / FLOOD / "config.pbtxt"
    text = config.read_text().replace(f'name: "{MODEL}"', f'name: "{FLOOD}"')
    paced = 'key: "token_interval_us"\n  value: { string_value: "10000" }'
    assert paced in text
    config.write_text(text.replace(paced, paced.replace("10000", "0")))
    return root


@pytest.fixture(scope="module")
async def triton(repository: Path) -> AsyncIterator[EmbeddedTriton]:
    server = EmbeddedTriton(repository, models=[MODEL, FLOOD], ready_timeout_s=RESTART_WITHIN_S)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(triton: EmbeddedTriton) -> AsyncIterator[TritonClient]:
    backend = TritonClient(triton.grpc_url)
    try:
        yield backend
    finally:
        await backend.close()


def loadgen_inputs(max_tokens: int, stream: bool) -> list[grpcclient.InferInput]:
    text = grpcclient.InferInput("text_input", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[b"tell me a long story"]], dtype=np.object_))
    tokens = grpcclient.InferInput("max_tokens", [1, 1], "INT32")
    tokens.set_data_from_numpy(np.array([[max_tokens]], dtype=np.int32))
    flag = grpcclient.InferInput("stream", [1, 1], "BOOL")
    flag.set_data_from_numpy(np.array([[stream]], dtype=bool))
    return [text, tokens, flag]


async def executions(triton: EmbeddedTriton) -> int:
    """How many requests the fixture's ``execute`` has taken (Triton's model statistics)."""
    async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
        stats = (await http.get(f"{triton.http_url}/v2/models/{MODEL}/stats")).json()
    return sum(int(m["inference_stats"]["success"]["count"]) for m in stats["model_stats"])


async def wait_restarted(triton: EmbeddedTriton, restarts_before: int) -> float:
    """Seconds until the watchdog has a new server ready."""
    started = time.monotonic()
    while not (triton.restarts > restarts_before and triton.ready):
        assert time.monotonic() - started < RESTART_WITHIN_S, "the watchdog did not restart it"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def one_short_answer(client: TritonClient) -> list[bytes]:
    words = []
    async for response in client.stream(MODEL, loadgen_inputs(3, stream=True), "after"):
        words.append(response.raw_output_contents[0][4:])  # after its 4-byte length
    return words


async def crash_and_check(
    triton: EmbeddedTriton,
    client: TritonClient,
    request: asyncio.Task[object],
    kill_with: signal.Signals,
) -> None:
    """Kill the server now; the request must fail, the server come back clean."""
    assert triton.pid is not None
    before = ServerSnapshot.of(triton.pid)
    assert before.stubs, "the fixture's stub process was not found"
    assert all(path.exists() for path in before.shm_files)
    restarts = triton.restarts
    rss = ", ".join(f"{stub.rss_mb:.0f} MB" for stub in before.stubs)
    killed_at = time.monotonic()
    os.kill(before.pid, kill_with)

    with pytest.raises((UpstreamUnavailable, UpstreamFailed)):
        await asyncio.wait_for(request, CLIENT_ERROR_WITHIN_S)
    client_error_s = time.monotonic() - killed_at
    restart_s = await wait_restarted(triton, restarts)
    orphans, shm = await before.wait_gone(LEFTOVERS_GONE_WITHIN_S)
    print(
        f"\n{kill_with.name} of tritonserver {before.pid} ({len(before.stubs)} stub(s): {rss}): "
        f"client error after {client_error_s:.2f} s, ready again after {restart_s:.2f} s; "
        f"left behind: {len(orphans)} stub(s) {[s.pid for s in orphans]}, "
        f"{len(shm)} shm file(s)"
    )
    assert not orphans, f"stubs of the dead server still run: {orphans}"
    assert not shm, f"shared memory of the dead server remains: {shm}"
    assert triton.pid != before.pid
    assert await one_short_answer(client) == [b" lorem", b" ipsum", b" dolor"]


async def test_sigkill_mid_stream(triton: EmbeddedTriton, client: TritonClient) -> None:
    """Streams that have sent tokens are cut by SIGKILL: each reader gets an error, not a
    hang. One is paced; two flood the client and are killed young (their first tokens just
    out), which is when the flooding stub gets stuck for ever without the launcher's clean-up
    (every such kill left it behind on the original launcher)."""
    received = {"paced": 0, "flood-1": 0, "flood-2": 0}
    streaming = {name: asyncio.Event() for name in received}

    async def read_stream(request_id: str) -> object:
        model = MODEL if request_id == "paced" else FLOOD
        async for _ in client.stream(model, loadgen_inputs(10_000_000, True), request_id):
            received[request_id] += 1
            if received[request_id] >= 3:
                streaming[request_id].set()
        return received[request_id]

    async def read_all() -> object:
        paced = asyncio.ensure_future(read_stream("paced"))
        await streaming["paced"].wait()
        floods = [read_stream("flood-1"), read_stream("flood-2")]
        ends = await asyncio.gather(paced, *floods, return_exceptions=True)
        errors = [end for end in ends if isinstance(end, BaseException)]
        assert len(errors) == len(ends), f"a stream did not fail: {ends}"
        assert all(isinstance(e, (UpstreamUnavailable, UpstreamFailed)) for e in errors), ends
        raise errors[0]

    request = asyncio.create_task(read_all())
    await asyncio.wait_for(streaming["paced"].wait(), 30)
    flooding = [asyncio.ensure_future(streaming[f"flood-{i}"].wait()) for i in (1, 2)]
    _, pending = await asyncio.wait(flooding, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    for waiter in pending:
        waiter.cancel()
    assert len(pending) < 2, "no flood stream started"
    await crash_and_check(triton, client, request, signal.SIGKILL)
    assert received["paced"] >= 3


async def test_sigsegv_during_a_request(triton: EmbeddedTriton, client: TritonClient) -> None:
    """A crash (SIGSEGV, as Triton 2.51 did under cancellations) while a non-streaming
    request waits for its answer."""
    executed = await executions(triton)

    async def one_answer() -> object:
        # 100,000 tokens 10 ms apart: answered in one piece after ~17 minutes.
        return [r async for r in client.stream(MODEL, loadgen_inputs(100_000, False), "req-1")]

    request = asyncio.create_task(one_answer())
    deadline = time.monotonic() + 30
    while await executions(triton) <= executed:  # the model has taken the request
        assert time.monotonic() < deadline, "the request never reached the model"
        await asyncio.sleep(0.05)
    await crash_and_check(triton, client, request, signal.SIGSEGV)


@pytest.fixture(scope="module")
async def gateway_url(triton: EmbeddedTriton) -> AsyncIterator[str]:
    """The real gateway on a loopback port, serving the paced fixture as ``loadgen``."""
    settings = Settings(
        models=[
            ServedModel(
                id="loadgen",
                family="llava",
                triton_model=MODEL,
                triton_url=triton.grpc_url,
                end_id="server",
            )
        ],
        embedded=EmbeddedSettings(enabled=False),
    )
    async with serving(settings) as url:
        yield url


def chat(stream: bool, max_tokens: int) -> dict[str, object]:
    return {
        "model": "loadgen",
        "messages": [{"role": "user", "content": "tell me a long story"}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


async def test_sigkill_under_the_gateway(triton: EmbeddedTriton, gateway_url: str) -> None:
    """Through the real gateway: an SSE stream cut by the crash ends with an error event
    promptly, and the gateway answers again once the watchdog has restarted Triton."""
    async with httpx.AsyncClient(base_url=gateway_url, trust_env=False, timeout=60) as http:
        assert triton.pid is not None
        before = ServerSnapshot.of(triton.pid)
        restarts = triton.restarts
        events: list[str] = []
        async with http.stream("POST", "/v1/chat/completions", json=chat(True, 4000)) as answer:
            assert answer.status_code == 200
            lines = answer.aiter_lines()
            async for line in lines:
                if line.startswith("data: "):
                    events.append(line[6:])
                if len(events) >= 5:
                    break
            killed_at = time.monotonic()
            os.kill(before.pid, signal.SIGKILL)

            async def rest() -> None:
                async for line in lines:
                    if line.startswith("data: "):
                        events.append(line[6:])

            await asyncio.wait_for(rest(), CLIENT_ERROR_WITHIN_S)
        stream_end_s = time.monotonic() - killed_at
        errors = [json.loads(e)["error"] for e in events if e.startswith('{"error"')]
        assert errors and errors[0]["code"] in ("upstream_unavailable", "upstream_failed"), events
        assert events[-1] == "[DONE]"
        restart_s = await wait_restarted(triton, restarts)
        # The gateway's channel reconnects by itself; until then requests get a quick 503.
        while True:
            answer = await http.post("/v1/chat/completions", json=chat(False, 3))
            if answer.status_code == 200:
                break
            assert answer.status_code == 503, answer.text
            assert time.monotonic() - killed_at < RESTART_WITHIN_S
            await asyncio.sleep(0.1)
        serving_s = time.monotonic() - killed_at
        orphans, shm = await before.wait_gone(LEFTOVERS_GONE_WITHIN_S)
        print(
            f"\nSIGKILL under the gateway: SSE stream ended with {errors[0]['code']} after "
            f"{stream_end_s:.2f} s; Triton ready after {restart_s:.2f} s; the gateway answered "
            f"200 after {serving_s:.2f} s; left behind: {len(orphans)} stub(s), {len(shm)} shm"
        )
        assert answer.json()["choices"][0]["message"]["content"] == " lorem ipsum dolor"
        assert not orphans and not shm
