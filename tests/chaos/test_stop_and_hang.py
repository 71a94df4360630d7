"""Real processes: ``mmgw serve`` in front of a real ``tritonserver`` (the no-compute load
fixture, streaming one word every 50 ms), then the faults an operator meets.

- SIGSTOP of Triton mid-stream: every open stream ends with an error event and ``[DONE]``
  within the token timeout (``upstream_timeout`` from the silence watch, or
  ``upstream_unavailable`` when the readiness probe, every 0.5 s here, loses Triton first: see
  ``test_frozen_triton.py``); new requests are refused fast with 503 while Triton does not
  answer its readiness probe; after SIGCONT it serves again.
- SIGTERM of the gateway with streams in flight: each ends with a ``server_shutting_down``
  error event and ``[DONE]`` (none cut mid-body), within the drain time; the gateway exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bench.stack import API_KEY, BENCH_MODEL, SERVED_ID, set_token_interval, start_triton
from gateway.triton.embedded import EmbeddedTriton, free_loopback_port

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
TOKEN_TIMEOUT_S = 2.0
DRAIN_S = 3.0


@pytest.fixture(scope="module")
async def triton() -> AsyncIterator[EmbeddedTriton]:
    server = await start_triton()
    try:
        await set_token_interval(server, 50_000)  # one word every 50 ms
        yield server
    finally:
        await server.stop()


def _config(triton: EmbeddedTriton, port: int) -> str:
    return f"""api_keys = ["{API_KEY}"]

[server]
host = "127.0.0.1"
port = {port}
drain_timeout_s = {DRAIN_S}

[upstream]
first_token_timeout_s = 5
token_timeout_s = {TOKEN_TIMEOUT_S}
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


@pytest.fixture
async def gateway(
    triton: EmbeddedTriton, tmp_path: Path
) -> AsyncIterator[tuple[str, subprocess.Popen]]:
    port = free_loopback_port()
    config = tmp_path / "gateway.toml"
    config.write_text(_config(triton, port))
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
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


def _body(max_tokens: int = 400) -> dict:
    return {
        "model": SERVED_ID,
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": max_tokens,
        "stream": True,
    }


async def _stream(http: httpx.AsyncClient, started: asyncio.Event | None = None) -> list:
    """The stream's events (``[DONE]`` as a string), read until the server ends it."""
    events: list = []
    async with http.stream("POST", "/v1/chat/completions", json=_body(), headers=HEADERS) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
                if started is not None and len(events) >= 3:
                    started.set()
    return events


async def test_a_stopped_triton_ends_streams_with_an_error_event_then_recovers(
    triton: EmbeddedTriton, gateway: tuple[str, subprocess.Popen]
) -> None:
    url, _ = gateway
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as http:
        started = [asyncio.Event() for _ in range(4)]
        streams = [asyncio.create_task(_stream(http, s)) for s in started]
        await asyncio.wait_for(asyncio.gather(*(s.wait() for s in started)), 10)
        assert triton.pid is not None
        os.kill(triton.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            ended = await asyncio.wait_for(asyncio.gather(*streams), TOKEN_TIMEOUT_S + 5)
            took = time.monotonic() - stopped_at
            assert took < TOKEN_TIMEOUT_S * 1.5 + 1.0, took  # the watch wakes every half limit
            for events in ended:
                assert events[-1] == "[DONE]"
                code = events[-2]["error"]["code"]
                assert code in ("upstream_timeout", "upstream_unavailable"), events[-2]
            await asyncio.sleep(1.5)  # a readiness probe or two fail
            refused_at = time.monotonic()
            refused = await http.post("/v1/chat/completions", json=_body(2) | {"stream": False},
                                      headers=HEADERS)  # fmt: skip
            refusal_s = time.monotonic() - refused_at
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "upstream_unavailable"
            assert refusal_s < 1.0
        finally:
            os.kill(triton.pid, signal.SIGCONT)
        print(f"\nSIGSTOP: 4 streams ended with an error event after {took:.2f} s; "
              f"a new request refused in {refusal_s * 1000:.0f} ms")  # fmt: skip
        for _ in range(40):  # the probe sees it ready again
            again = await http.post("/v1/chat/completions", json=_body(2) | {"stream": False},
                                    headers=HEADERS)  # fmt: skip
            if again.status_code == 200:
                break
            await asyncio.sleep(0.25)
        assert again.status_code == 200, again.text


async def test_sigterm_ends_streams_with_server_shutting_down_and_exits(
    gateway: tuple[str, subprocess.Popen],
) -> None:
    url, process = gateway
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as http:
        started = [asyncio.Event() for _ in range(6)]
        streams = [asyncio.create_task(_stream(http, s)) for s in started]
        await asyncio.wait_for(asyncio.gather(*(s.wait() for s in started)), 10)
        process.send_signal(signal.SIGTERM)
        sent_at = time.monotonic()
        ended = await asyncio.wait_for(asyncio.gather(*streams), DRAIN_S + 5)
        took = time.monotonic() - sent_at
    for events in ended:
        assert events[-1] == "[DONE]", events[-3:]
        assert events[-2]["error"]["code"] == "server_shutting_down", events[-2]
    assert DRAIN_S - 1.5 < took < DRAIN_S + 1.0, took
    # uvicorn re-raises the signal it caught once it has shut down: "terminated by SIGTERM"
    assert process.wait(DRAIN_S + 10) in (0, -signal.SIGTERM)
    print(
        f"\nSIGTERM: 6 streams ended with server_shutting_down + [DONE] after {took:.2f} s; "
        f"exit status {process.returncode}"
    )


async def _in_flight(http: httpx.AsyncClient) -> float:
    metrics = (await http.get("/metrics")).text
    line = next(x for x in metrics.splitlines() if x.startswith("mmgw_in_flight_requests "))
    return float(line.split()[1])


async def test_a_stream_abandoned_before_its_first_token_is_let_go_at_once(
    triton: EmbeddedTriton, gateway: tuple[str, subprocess.Popen]
) -> None:
    """Triton holds the first token for 3 s (a long queue or prefill); the client leaves after
    0.5 s: the gateway cancels at once instead of waiting for the token nobody will read."""
    url, _ = gateway
    await set_token_interval(triton, 50_000, delay_us=3_000_000)
    try:
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as http:
            request = http.build_request(
                "POST", "/v1/chat/completions", json=_body(), headers=HEADERS
            )
            # The response's headers wait for the first token: leave while they do.
            sending = asyncio.create_task(http.send(request, stream=True))
            await asyncio.sleep(0.5)
            assert not sending.done() and await _in_flight(http) == 1
            sending.cancel()  # the connection is closed
            left_at = time.monotonic()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            for _ in range(40):
                if await _in_flight(http) == 0:
                    break
                await asyncio.sleep(0.05)
            let_go = time.monotonic() - left_at
            assert await _in_flight(http) == 0
    finally:
        await set_token_interval(triton, 50_000)
    assert let_go < 1.5, let_go
    print(f"\nabandoned before its first token: the gateway let go after {let_go * 1000:.0f} ms")
