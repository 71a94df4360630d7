"""A minimal HTTP/1.1 client for streamed POSTs that timestamps each SSE token event.

Why not httpx or aiohttp: the load generator shares this small machine with the servers
it measures, so every microsecond it spends per token is taken from them and blurs the
timings. This client keeps one keep-alive connection per simulated user, decodes chunked
transfer encoding with two reads per chunk, and only searches each event for a marker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

# A token event holds this marker followed by a non-empty JSON string.
OPENAI_MARKER = b'"content":"'
TRITON_MARKER = b'"text_output":"'


class HttpStreamError(Exception):
    """A non-200 answer, an error event, or a broken connection."""


@dataclass
class StreamTiming:
    """One request's clock readings (``time.perf_counter``): its start and each token."""

    started: float
    tokens: list[float] = field(default_factory=list)


def is_token(event: bytes, marker: bytes) -> bool:
    """True when ``event`` carries generated text (not the empty role chunk, not usage)."""
    at = event.find(marker)
    return at >= 0 and event[at + len(marker) : at + len(marker) + 1] != b'"'


class HttpStreamClient:
    """One keep-alive connection to ``host:port`` issuing streamed POSTs, one at a time."""

    def __init__(self, host: str, port: int, headers: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.port = port
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\n{extra}"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None

    async def post(
        self, path: str, body: bytes, marker: bytes, headers: Mapping[str, str] | None = None
    ) -> StreamTiming:
        """POST ``body`` (with ``headers`` besides the connection's) and read the streamed
        answer; raises HttpStreamError on any failure."""
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = f"POST {path} HTTP/1.1\r\n{self._head}{extra}"
        request = f"{head}Content-Length: {len(body)}\r\n\r\n"
        timing = StreamTiming(time.perf_counter())
        try:
            self._writer.write(request.encode() + body)
            status, headers = await self._read_head(self._reader)
            if status != 200:
                raise HttpStreamError(f"HTTP {status}: {await self._read_body(headers)!r}"[:300])
            await self._read_events(self._reader, headers, marker, timing.tokens)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            await self.close()
            raise HttpStreamError(f"{type(exc).__name__}: {exc}") from exc
        except HttpStreamError:
            await self.close()
            raise
        return timing

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name:
                headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _read_body(self, headers: dict[bytes, bytes]) -> bytes:
        assert self._reader is not None
        if headers.get(b"transfer-encoding") == b"chunked":
            parts = []
            while chunk := await self._chunk(self._reader):
                parts.append(chunk)
            return b"".join(parts)
        return await self._reader.readexactly(int(headers.get(b"content-length", b"0")))

    @staticmethod
    async def _chunk(reader: asyncio.StreamReader) -> bytes:
        """One chunk of a chunked body; b'' at the end (after consuming the trailer)."""
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b""
        return (await reader.readexactly(size + 2))[:-2]

    async def _read_events(
        self,
        reader: asyncio.StreamReader,
        headers: dict[bytes, bytes],
        marker: bytes,
        tokens: list[float],
    ) -> None:
        if headers.get(b"transfer-encoding") != b"chunked":
            chunks = [await reader.readexactly(int(headers.get(b"content-length", b"0")))]
        else:
            chunks = None
        pending = b""
        clock = time.perf_counter
        while True:
            data = (
                chunks.pop() if chunks else (await self._chunk(reader) if chunks is None else b"")
            )
            if not data:
                break
            pending += data
            if b"\n\n" not in pending:
                continue
            *events, pending = pending.split(b"\n\n")
            now = clock()
            for event in events:
                if is_token(event, marker):
                    tokens.append(now)
                elif b'"error"' in event:
                    raise HttpStreamError(f"error event: {event[:300]!r}")
        if headers.get(b"connection") == b"close":
            await self.close()
