"""`mmgw serve --workers 2`: two gateway processes on one port, one co-launched Triton, their
metrics added up, a dead worker replaced, and every process gone after SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from gateway.triton.embedded import free_loopback_port
from tests.e2e.test_serve_command import wait_healthy

pytestmark = pytest.mark.e2e


def _children(pid: int) -> dict[int, str]:
    """The process tree under ``pid``: pid -> its command line."""
    tree: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        tree[int(entry.name)] = f"{fields[1]} {command}"  # parent pid first
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, line in tree.items():
            if line.split(" ", 1)[0] == str(parent):
                found[child] = line.split(" ", 1)[1]
                frontier.append(child)
    return found


def _workers(pid: int) -> list[int]:
    return sorted(p for p, line in _children(pid).items() if "gateway.workers" in line)


async def _requests_counted(http: httpx.AsyncClient) -> float:
    text = (await http.get("/metrics")).text
    lines = [line for line in text.splitlines() if line.startswith("mmgw_requests_total{")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if 'endpoint="/v1/models"' in line)


async def test_workers_share_the_port_one_triton_and_their_metrics(reference_cache: Path) -> None:
    port = free_loopback_port()
    env = dict(os.environ, MMGW_REFERENCE_CACHE=str(reference_cache))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "serve", "--port", str(port), "--workers", "2",
        "--device", "cpu", "--log-level", "warning",
        env=env, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(url, process, timeout_s=300)
        tree = _children(process.pid)
        assert sum("bin/tritonserver" in line for line in tree.values()) == 1
        first = _workers(process.pid)
        assert len(first) == 2
        async with httpx.AsyncClient(base_url=url, timeout=60, trust_env=False) as http:
            answer = await http.post(
                "/v1/chat/completions",
                json={"model": "reference-llava", "messages": [{"role": "user", "content": "Hi"}],
                      "max_tokens": 3},
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
            # Fresh connections: the kernel hands them to either worker; the sum is exact.
            for _ in range(20):
                async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as one:
                    assert (await one.get("/v1/models")).status_code == 200
            assert await _requests_counted(http) == 20
            os.kill(first[0], signal.SIGKILL)
            for _ in range(100):
                now = _workers(process.pid)
                if len(now) == 2 and first[0] not in now:
                    break
                await asyncio.sleep(0.2)
            assert len(now) == 2 and first[0] not in now, now
            await wait_healthy(url, process, timeout_s=60)
            assert await _requests_counted(http) >= 20  # the dead worker's counts stay
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 90)
    assert code == 0
    assert not _children(process.pid)
