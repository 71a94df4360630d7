"""routes/realtime.py with a client that stops reading: the socket's send never returns (a
stand-in WebSocket: a real one only blocks once megabytes of kernel buffers are full). The
session's outbox overflows and the route closes the socket with 1008 instead of waiting."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.pipeline.realtime.config import SessionConfig
from gateway.pipeline.realtime.outbox import Outbox
from gateway.pipeline.realtime.session import RealtimeSession
from gateway.routes import realtime as route
from tests.fakes.app import FakeGateway


class StuckSocket:
    """Receives nothing, and never finishes sending (a client that does not read)."""

    def __init__(self) -> None:
        self.sent = 0
        self.closed: tuple[int, str] | None = None

    async def receive(self) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send_text(self, text: str) -> None:
        self.sent += 1
        await asyncio.Event().wait()

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self.closed = (code, reason or "")


async def test_a_client_that_stops_reading_is_closed_with_1008(
    gateway: FakeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(route, "WRITER_GRACE_S", 0.1)
    socket = StuckSocket()
    runtime = gateway.runtime
    config = SessionConfig(model="fake-whisper")
    limits, metrics = runtime.settings.realtime, runtime.metrics.realtime
    session = RealtimeSession(runtime, limits, metrics, config, Outbox(16))
    serving = asyncio.create_task(route._serve(socket, session))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert socket.sent == 1  # session.created: stuck in send
    for n in range(20):  # events the session has for the client meanwhile
        session.outbox.put({"type": "test", "n": n})
    await asyncio.wait_for(serving, 5)
    assert socket.closed == (1008, "client is not reading its events")
