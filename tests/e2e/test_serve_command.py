"""`mmgw serve` as a newcomer runs it: co-launches Triton, serves, shuts down on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from gateway.config import default_models
from gateway.triton.embedded import free_loopback_port

pytestmark = pytest.mark.e2e


async def wait_healthy(url: str, process: asyncio.subprocess.Process, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with httpx.AsyncClient(timeout=2, trust_env=False) as http:
        while loop.time() < deadline:
            assert process.returncode is None, "mmgw serve exited early"
            try:
                if (await http.get(f"{url}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise AssertionError("mmgw serve did not become healthy in time")


async def test_mmgw_serve_co_launches_triton_and_answers(reference_cache: Path) -> None:
    port = free_loopback_port()
    env = dict(os.environ, MMGW_REFERENCE_CACHE=str(reference_cache))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "serve",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--log-level",
        "warning",
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(url, process, timeout_s=300)
        async with httpx.AsyncClient(base_url=url, timeout=120, trust_env=False) as http:
            models = (await http.get("/v1/models")).json()
            assert [m["id"] for m in models["data"]] == [m.id for m in default_models()]
            answer = await http.post(
                "/v1/chat/completions",
                json={
                    "model": "reference-llava-onevision",
                    "messages": [{"role": "user", "content": "Hello"}],
                    "max_tokens": 3,
                },
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["usage"]["completion_tokens"] >= 1
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 60)
    # uvicorn re-raises the SIGTERM it handled once shutdown (and Triton's stop) completed.
    assert code in (0, -signal.SIGTERM)
