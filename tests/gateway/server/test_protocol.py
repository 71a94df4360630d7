"""The bounded httptools protocol, fed bytes in-process: 431 for too many or too large header
fields (refused within a read of the limit), 408 for a head that comes too slowly, a quiet
close for a connection that never speaks, and the refusals counted under their endpoint.

The transport is a stand-in that records what the server writes; timers run on the test's
event loop with deadlines of a fraction of a second.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from uvicorn.config import Config
from uvicorn.server import ServerState

from gateway.config import ServerSettings
from gateway.observability.metrics import GatewayMetrics
from gateway.server import protocol as protocol_module
from gateway.server.protocol import LimitedHttpToolsProtocol, protocol_class
from tests.gateway.observability.test_metrics import samples

HEAD_S, BODY_S = 0.2, 0.3


class Transport(asyncio.Transport):
    """Records writes, the half-close and the close."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.eof = self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.eof, "written after the half-close"
        self.written += data

    def write_eof(self) -> None:
        self.eof = True

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def status(self) -> int | None:
        return int(self.written.split(b" ", 2)[1]) if self.written else None

    def error(self) -> dict[str, Any]:
        head, _, body = bytes(self.written).partition(b"\r\n\r\n")
        assert b"\r\nconnection: close" in head and b"content-type: application/json" in head
        return dict(json.loads(body)["error"])


def gateway_app() -> FastAPI:
    router = APIRouter()

    @router.get("/v1/models")
    async def models() -> dict[str, str]:
        return {"object": "list"}

    @router.get("/slow")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(HEAD_S * 2)
        return {"ok": "yes"}

    app = FastAPI()
    app.include_router(router)
    app.state.metrics = GatewayMetrics()
    app.state.endpoints = list(router.routes)
    return app


@pytest.fixture
def app() -> FastAPI:
    return gateway_app()


def connect(app: FastAPI, **limits: Any) -> tuple[LimitedHttpToolsProtocol, Transport]:
    settings = ServerSettings(header_timeout_s=HEAD_S, body_timeout_s=BODY_S, **limits)
    config = Config(app=app, log_level="warning")
    protocol = protocol_class(settings, app)(
        config=config, server_state=ServerState(), app_state={}
    )
    transport = Transport()
    protocol.connection_made(transport)
    return protocol, transport


def counted(app: FastAPI, endpoint: str, status: int, code: str) -> float:
    key = (("code", code), ("endpoint", endpoint), ("model", ""), ("status", str(status)))
    return samples(app.state.metrics).get(("mmgw_requests_total", key), 0.0)


def head(fields: int = 0, path: bytes = b"/v1/models") -> bytes:
    lines = b"".join(b"X-Field-%d: v\r\n" % i for i in range(fields))
    return b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n" + lines + b"\r\n"


async def answered(transport: Transport, timeout: float = 2.0) -> int | None:
    for _ in range(int(timeout / 0.01)):
        if transport.written.endswith(b"}") or transport.closed:
            break
        await asyncio.sleep(0.01)
    return transport.status()


async def test_headers_within_the_limits_are_served(app: FastAPI) -> None:
    protocol, transport = connect(app, max_headers=20)
    protocol.data_received(head(fields=19))  # and Host: 20
    assert await answered(transport) == 200
    assert not transport.closed


async def test_too_many_header_fields_are_a_431_counted_under_the_endpoint(app: FastAPI) -> None:
    protocol, transport = connect(app, max_headers=20)
    protocol.data_received(head(fields=10_000))
    assert transport.status() == 431 and transport.eof and not transport.closed
    error = transport.error()
    assert error["code"] == "request_header_fields_too_large"
    assert error["type"] == "invalid_request_error" and "20 header fields" in error["message"]
    assert counted(app, "/v1/models", 431, "request_header_fields_too_large") == 1


def chunks(size: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    yield b"GET /v1/models HTTP/1.1\r\nHost: t\r\nX-Big: "
    for _ in range(size // chunk):
        yield b"a" * chunk


async def test_a_huge_header_is_refused_within_a_read_of_the_limit(app: FastAPI) -> None:
    protocol, transport = connect(app, max_header_bytes=64 * 1024)
    fed = 0
    for data in chunks(64 << 20):
        protocol.data_received(data)
        fed += len(data)
        if transport.written:
            break
    assert transport.status() == 431
    assert fed <= 64 * 1024 + 2 * 64 * 1024  # the limit, then at most one more read
    # Host came whole before X-Big: the request line was read, so the endpoint is known.
    assert counted(app, "/v1/models", 431, "request_header_fields_too_large") == 1
    protocol.data_received(b"a" * 1024)  # what still comes is dropped
    assert transport.error()["code"] == "request_header_fields_too_large"


async def test_a_long_request_line_or_many_small_fields_count_as_header_bytes(
    app: FastAPI,
) -> None:
    protocol, transport = connect(app, max_header_bytes=4096)
    protocol.data_received(head(path=b"/v1/models?" + b"q" * 5000))
    assert transport.status() == 431
    protocol, transport = connect(app, max_header_bytes=4096)
    protocol.data_received(head(fields=50)[:-2] + b"X-Last: " + b"v" * 3500 + b"\r\n\r\n")
    assert transport.status() == 431
    assert "4096 bytes" in transport.error()["message"]


async def test_headers_that_come_too_slowly_are_a_408(app: FastAPI) -> None:
    protocol, transport = connect(app)
    protocol.data_received(b"GET /v1/models HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    await asyncio.sleep(HEAD_S / 2)
    protocol.data_received(b"a")
    assert transport.status() is None
    await asyncio.sleep(HEAD_S)
    assert transport.status() == 408 and transport.error()["code"] == "request_timeout"
    assert counted(app, "/v1/models", 408, "request_timeout") == 1


async def test_a_connection_that_never_speaks_is_closed_at_the_header_deadline(
    app: FastAPI,
) -> None:
    _, transport = connect(app)
    await asyncio.sleep(HEAD_S * 1.5)
    assert transport.closed and transport.written == b""


async def test_the_header_deadline_ends_with_the_headers_and_restarts_per_request(
    app: FastAPI,
) -> None:
    protocol, transport = connect(app)
    protocol.data_received(head(path=b"/slow"))  # served after twice the header deadline
    assert await answered(transport) == 200 and not transport.closed
    transport.written.clear()
    protocol.data_received(b"GET /v1/models HTTP/1.1\r\n")  # the next request, half a head
    await asyncio.sleep(HEAD_S * 1.5)
    assert transport.status() == 408


async def test_a_refused_connection_is_drained_then_closed(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol_module, "LINGER_S", 0.05)
    protocol, transport = connect(app, max_headers=10)
    protocol.data_received(head(fields=50))
    assert transport.eof and not transport.closed
    await asyncio.sleep(0.1)
    assert transport.closed


async def test_a_body_answered_unread_may_take_the_body_deadline_then_the_connection_closes(
    app: FastAPI,
) -> None:
    protocol, transport = connect(app)
    protocol.data_received(b"POST /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{")
    assert await answered(transport) == 404 and not transport.closed
    await asyncio.sleep(BODY_S / 2)
    protocol.data_received(b" ")  # trickling keeps uvicorn's keep-alive timer at bay
    assert not transport.closed
    await asyncio.sleep(BODY_S)
    assert transport.closed


async def test_a_pipelined_head_refused_behind_a_response_closes_after_it(app: FastAPI) -> None:
    protocol, transport = connect(app, max_headers=10)
    protocol.data_received(head(path=b"/slow") + head(fields=50))
    assert await answered(transport) == 200
    assert transport.written.count(b"HTTP/1.1") == 1 and transport.closed
