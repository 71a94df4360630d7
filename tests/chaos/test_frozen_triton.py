"""Issue 22 item 7, for real: ``mmgw serve`` with the default silence limits (30 s between
tokens, 120 s to the first) in front of a real ``tritonserver`` (the load fixture, a word every
50 ms), which is then SIGSTOPped with requests in every phase: streams mid-answer, requests
waiting for their first token, requests accepted a moment before readiness is lost. Every one
of them ends within 5 s of the gateway's /health turning 503 (an error event on a stream, a 503
before it), and after SIGCONT the same gateway process serves again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from bench.stack import BENCH_MODEL, SERVED_ID, set_token_interval, start_triton
from gateway.triton.embedded import EmbeddedTriton, free_loopback_port
from tests.chaos.test_stop_and_hang import HEADERS, _body

LOST_WITHIN_S = 5.0


@pytest.fixture(scope="module")
async def triton() -> AsyncIterator[EmbeddedTriton]:
    server = await start_triton()
    try:
        await set_token_interval(server, 50_000)
        yield server
    finally:
        await server.stop()


@pytest.fixture
def config(triton: EmbeddedTriton) -> str:
    """The default upstream limits: only the lost readiness can end these calls quickly."""
    return f"""api_keys = ["{HEADERS["Authorization"][7:]}"]

[server]
host = "127.0.0.1"
port = PORT

[upstream]
ready_check_interval_s = 0.5

[embedded]
enabled = false

[[models]]
id = "{SERVED_ID}"
family = "llava"
triton_model = "{BENCH_MODEL}"
triton_url = "{triton.grpc_url}"
end_id = "server"
"""


async def _call(http: httpx.AsyncClient, stream: bool, sent: asyncio.Event) -> tuple[float, str]:
    """(when it ended, how): "event:<code>", "status:<code>" or "done" (answered whole)."""
    body = _body() | {"stream": stream}
    if not stream:
        sent.set()
        reply = await http.post("/v1/chat/completions", json=body, headers=HEADERS)
        how = "done" if reply.status_code == 200 else f"status:{reply.status_code}"
        return time.monotonic(), how
    async with http.stream("POST", "/v1/chat/completions", json=body, headers=HEADERS) as r:
        sent.set()
        if r.status_code != 200:
            await r.aread()
            return time.monotonic(), f"status:{r.status_code}"
        last = None
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                last = json.loads(line[6:])
        code = (last or {}).get("error", {}).get("code")
        return time.monotonic(), f"event:{code}" if code else "done"


async def test_a_frozen_triton_ends_every_call_within_5_s_of_lost_readiness(
    triton: EmbeddedTriton, tmp_path: Path, config: str
) -> None:
    async with (
        _serving(tmp_path, config) as (url, process),
        httpx.AsyncClient(base_url=url, trust_env=False, timeout=60) as http,
    ):
        calls = []
        for _ in range(3):  # mid-stream: answering when Triton stops
            sent = asyncio.Event()
            calls.append(asyncio.create_task(_call(http, True, sent)))
        await asyncio.sleep(1.0)
        assert triton.pid is not None
        os.kill(triton.pid, signal.SIGSTOP)
        try:
            lost_at = await _accept_until_lost(http, calls)
            ended = await asyncio.wait_for(asyncio.gather(*calls), 30)
            hows = sorted({how for _, how in ended})
            latest = max(at for at, _ in ended) - lost_at
            print(f"\nfrozen Triton: {len(ended)} calls in flight ended {hows}, the last "
                      f"{latest:.2f} s after readiness was lost")  # fmt: skip
            assert latest < LOST_WITHIN_S, (latest, ended)
            assert all(h in ("event:upstream_unavailable", "status:503") for h in hows), hows
        finally:
            os.kill(triton.pid, signal.SIGCONT)
        await _serves_again(http)
        assert process.poll() is None  # the same process, no restart


async def _accept_until_lost(http: httpx.AsyncClient, calls: list) -> float:
    """Send requests (streamed and not, in turn) every 0.2 s: until readiness is lost each is
    accepted and waits for a first token that does not come; the first one refused at once
    (503) shows readiness is lost. Returns when the last accepted one was sent (readiness was
    lost after it: a lower bound, so the 5 s are measured conservatively)."""
    accepted_at = time.monotonic()
    for index in range(200):
        sent = asyncio.Event()
        call = asyncio.create_task(_call(http, index % 2 == 0, sent))
        sent_at = time.monotonic()
        done, _ = await asyncio.wait([call], timeout=0.2)
        if done and call.result()[1] == "status:503":
            return accepted_at
        calls.append(call)
        accepted_at = sent_at
    raise AssertionError("readiness was never lost")


async def _serves_again(http: httpx.AsyncClient) -> None:
    for _ in range(80):
        again = await http.post("/v1/chat/completions", json=_body(2) | {"stream": False},
                                headers=HEADERS)  # fmt: skip
        if again.status_code == 200:
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"no service after SIGCONT: {again.text}")


@asynccontextmanager
async def _serving(tmp_path: Path, config: str) -> AsyncIterator[tuple[str, subprocess.Popen]]:
    """``mmgw serve`` in a process of its own; its URL and process."""
    port = free_loopback_port()
    path = tmp_path / "gateway.toml"
    path.write_text(config.replace("PORT", str(port)))
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(path)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=2) as http:
            for _ in range(300):
                try:
                    if (await http.get("/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                pytest.fail((tmp_path / "gateway.log").read_text()[-3000:])
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        log.close()
