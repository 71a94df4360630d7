"""Hostile and honest clients of a gateway on loopback, and the launched gateway they talk to.

Every client here is raw asyncio streams (no HTTP library would send a header a byte a second,
or ten thousand of them) and gives back an ``Outcome``: what the server answered and when,
timed from the connection's opening. Each waits at most ``give_up_s``, so a server that never
answers yields an outcome too (``status=None, open=True``) instead of a hung test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway.triton.embedded import free_loopback_port

HOST = "127.0.0.1"
CHAT = "/v1/chat/completions"
CHAT_BODY = json.dumps(
    {"model": "fake-llava", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
).encode()
# What the socket calls raise once the server has closed or reset the connection.
GONE = (ConnectionError, OSError, asyncio.IncompleteReadError)


CLOSE_WAIT_S = 3.0  # after a response, how long a client waits to see the server close


@dataclass
class Outcome:
    """One hostile client's result. ``status`` None: no response (closed, or still open)."""

    status: int | None = None
    code: str | None = None  # the OpenAI error code of the body, if it is one
    seconds: float = 0.0  # connection opened -> response read, connection ended, or gave up
    open: bool = False  # no response and still open when the client gave up
    closed: bool = False  # the server ended the connection (after its response, if any)
    sent: int = 0  # bytes the client managed to send
    headers: dict[str, str] = field(default_factory=dict)

    def brief(self) -> str:
        what = "open" if self.open else ("closed" if self.status is None else str(self.status))
        return f"{what} {self.code or ''} {self.seconds:.1f}s".replace("  ", " ")


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length body (all the server sends to refusals)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return status, headers, body


def _code(body: bytes) -> str | None:
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


class _Client:
    """One raw connection: the bytes sent, and a task reading the one response, then
    waiting (``CLOSE_WAIT_S``) to see whether the server closes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.started = time.monotonic()
        self.outcome = Outcome()
        self.answered = asyncio.Event()  # a response came, or the connection ended
        self.writer = writer
        self._task = asyncio.create_task(self._read(reader))

    @classmethod
    async def open(cls, port: int) -> _Client:
        return cls(*await asyncio.open_connection(HOST, port))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        outcome = self.outcome
        try:
            outcome.status, outcome.headers, body = await read_response(reader)
            outcome.code = _code(body)
        except GONE:
            outcome.closed = True
        finally:
            outcome.seconds = time.monotonic() - self.started
            self.answered.set()
        if not outcome.closed:
            try:
                await asyncio.wait_for(reader.read(), CLOSE_WAIT_S)
                outcome.closed = True
            except GONE:
                outcome.closed = True
            except asyncio.TimeoutError:
                pass

    def send(self, data: bytes) -> None:
        self.writer.write(data)
        self.outcome.sent += len(data)

    async def wait(self, timeout_s: float) -> bool:
        """Whether the server answered (or ended the connection) within ``timeout_s``."""
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.answered.wait(), max(timeout_s, 0.0))
        return self.answered.is_set()

    async def finish(self) -> Outcome:
        if not self.answered.is_set():
            self.outcome.open = True
            self.outcome.seconds = time.monotonic() - self.started
        else:
            await asyncio.wait({self._task}, timeout=CLOSE_WAIT_S + 1)
        self._task.cancel()
        self.writer.close()
        return self.outcome


async def trickle(
    port: int, head: bytes, drip: bytes = b"", interval_s: float = 1.0, give_up_s: float = 30.0
) -> Outcome:
    """Send ``head`` at once, then ``drip`` one byte per ``interval_s``, until the server
    answers, closes, or ``give_up_s`` has passed."""
    client = await _Client.open(port)
    deadline = client.started + give_up_s
    try:
        client.send(head)
        for i in range(len(drip)):
            wait_s = min(interval_s, deadline - time.monotonic())
            if wait_s <= 0 or await client.wait(wait_s):
                break
            client.send(drip[i : i + 1])
        await client.wait(deadline - time.monotonic())
    except GONE:
        await client.wait(1.0)
    return await client.finish()


async def flood(port: int, request: bytes, give_up_s: float = 30.0) -> Outcome:
    """Send ``request`` (a header bomb) in one go and read the answer."""
    return await trickle(port, request, give_up_s=give_up_s)


async def stream_header(
    port: int, size: int, chunk: int = 64 * 1024, give_up_s: float = 60.0
) -> Outcome:
    """One header of ``size`` bytes, written as fast as the server takes it, stopping at the
    server's answer; the header is ended only if the server let it all through."""
    client = await _Client.open(port)
    deadline = client.started + give_up_s
    filler = b"a" * chunk
    try:
        client.send(b"GET /v1/models HTTP/1.1\r\nHost: chaos\r\nX-Big: ")
        while client.outcome.sent < size and not client.answered.is_set():
            if time.monotonic() > deadline:
                break
            client.send(filler)
            await client.writer.drain()
            await asyncio.sleep(0)  # let the reader see an answer
        if not client.answered.is_set():
            client.send(b"\r\n\r\n")
        await client.wait(deadline - time.monotonic())
    except GONE:
        await client.wait(1.0)
    return await client.finish()


def chat_head(content_length: int, path: str = CHAT) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: chaos\r\nContent-Type: application/json\r\n"
        f"Content-Length: {content_length}\r\n\r\n"
    ).encode()


def many_headers(count: int) -> bytes:
    fields = b"".join(b"X-H%d: v\r\n" % i for i in range(count))
    return b"GET /v1/models HTTP/1.1\r\nHost: chaos\r\n" + fields + b"\r\n"


@dataclass
class Honest:
    """Real requests made while an attack runs: their statuses and slowest latency."""

    statuses: list[int] = field(default_factory=list)
    slowest_s: float = 0.0

    async def run(self, port: int, stop: asyncio.Event, every_s: float = 0.25) -> None:
        async with httpx.AsyncClient(
            base_url=f"http://{HOST}:{port}", timeout=30, trust_env=False
        ) as http:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    response = await http.post(CHAT, content=CHAT_BODY, headers=JSON)
                    self.statuses.append(response.status_code)
                except httpx.HTTPError:
                    self.statuses.append(0)
                self.slowest_s = max(self.slowest_s, time.monotonic() - began)
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), every_s)


JSON = {"content-type": "application/json"}


@asynccontextmanager
async def honest_traffic(port: int) -> AsyncIterator[Honest]:
    """Real chat requests, one every quarter second, for as long as the block runs."""
    honest, stop = Honest(), asyncio.Event()
    task = asyncio.create_task(honest.run(port, stop))
    try:
        yield honest
    finally:
        stop.set()
        await task


@dataclass
class Launched:
    """``tests.chaos.launcher`` in a subprocess on a free loopback port."""

    process: asyncio.subprocess.Process
    port: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            line = next(x for x in status if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    async def chat(self) -> int:
        async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
            response = await http.post(self.url + CHAT, content=CHAT_BODY, headers=JSON)
            return response.status_code


async def _wait_healthy(launched: Launched, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2, trust_env=False) as http:
        while time.monotonic() < deadline:
            assert launched.process.returncode is None, "the launcher exited early"
            with suppress(httpx.HTTPError):
                if (await http.get(launched.url + "/health")).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    raise AssertionError("the launched gateway did not become healthy in time")


@asynccontextmanager
async def launch(
    server: dict[str, Any],
    timeout_s: float = 60.0,
    sections: dict[str, Any] | None = None,
    wrap: Callable[[list[str]], list[str]] = list,
) -> AsyncIterator[Launched]:
    """The launcher with ``server`` settings and other ``sections``; ``wrap`` turns its command
    line into the one to run (in a namespace of its own, say)."""
    port = free_loopback_port()
    command = [sys.executable, "-m", "tests.chaos.launcher", str(port), json.dumps(server),
               json.dumps(sections or {})]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *wrap(command),
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    launched = Launched(process, port)
    try:
        await _wait_healthy(launched, timeout_s)
        yield launched
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 15)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()


class RssPeak:
    """The server's peak RSS while the block runs, sampled every 20 ms."""

    def __init__(self, launched: Launched) -> None:
        self.launched = launched
        self.before = launched.rss_mb()
        self.peak = self.before
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, self.launched.rss_mb())
            await asyncio.sleep(0.02)

    async def __aenter__(self) -> RssPeak:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task
        self.peak = max(self.peak, self.launched.rss_mb())
