"""uvicorn's httptools protocol with a bounded request head, and the class ``mmgw serve`` runs.

uvicorn calls the app only once a request's headers are complete, and httptools takes any
number of header fields of any size, at any pace: 10,000 fields, a 64 MiB header (which
httptools builds up by concatenation, stalling the event loop), or a byte a second forever.
So the head is bounded here, where its bytes arrive:

- **count**: ``on_header`` calls past ``max_headers`` -> 431;
- **size**: the request line and header fields past ``max_header_bytes`` -> 431, checked on
  the parsed fields and, for a field still arriving, on the raw reads, so a huge header is
  refused within one read (at most 256 KiB) of the limit instead of after it is all in;
- **time**: a request's headers must be complete ``header_timeout_s`` after its first byte (for
  a connection's first request, after the connection opened) -> 408; a connection that never
  sends a byte is closed silently at that deadline.

A refusal is an OpenAI error object with ``Connection: close``; the connection is then
half-closed and drained for ``LINGER_S`` (see ``limits.py``). The body's deadlines are the
app's (``gateway/observability/deadline.py``), for the bodies it reads; a body the app answered
without reading (a 401, a 404) may take at most ``body_timeout_s`` before the connection closes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar, NoReturn

import httptools
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.config import ServerSettings
from gateway.errors import GatewayError, HeaderFieldsTooLarge, RequestTimeout
from gateway.server.limits import LINGER_S, HttpLimits, RefusalReport, refusal_response


class _Refused(Exception):
    """Raised from a parser callback to stop the parser; the refusal is in ``_refusal``."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with the head limits of ``limits``; ``report`` hears refusals."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    report: ClassVar[RefusalReport | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._head_started = time.monotonic()
        self._in_head = False  # a request's first byte came, its headers are not complete
        self._fields = 0
        self._head_bytes = 0  # request line and complete fields, as parsed
        self._head_reads = 0  # whole reads that arrived while the head was incomplete
        self._refusal: GatewayError | None = None
        self._refused = False  # answered and half-closed: what still comes is dropped

    # -- connection -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._body_timer, self._linger_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """uvicorn's, with the refusals: a callback's, and a field still arriving too long."""
        if self._refused:
            return
        self._unset_keepalive_if_required()
        was_in_head = self._in_head
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(self._refusal)
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._in_head and was_in_head:
            self._head_reads += len(data)
            if self._head_reads > self.limits.max_header_bytes:
                self._refuse(self._too_many_bytes())

    # -- parser callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._fields = self._head_bytes = self._head_reads = 0
        if self._head_timer is None:
            self._start_head_clock()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > self.limits.max_headers:
            self._stop(HeaderFieldsTooLarge(f"more than {self.limits.max_headers} header fields"))
        self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        cycle = self.cycle
        if cycle is not None and cycle.more_body and not self.transport.is_closing():
            # Answered before its body was in (nobody will read the rest): bound the wait.
            self._body_timer = self.loop.call_later(
                self.limits.body_timeout_s, self.transport.close
            )

    # -- refusals ---------------------------------------------------------------------------

    def _start_head_clock(self) -> None:
        self._head_started = time.monotonic()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.limits.max_header_bytes:
            self._stop(self._too_many_bytes())

    def _too_many_bytes(self) -> HeaderFieldsTooLarge:
        return HeaderFieldsTooLarge(
            f"the request line and header fields are over {self.limits.max_header_bytes} bytes"
        )

    def _stop(self, error: GatewayError) -> NoReturn:
        self._refusal = error
        raise _Refused()

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if not self._in_head:  # not one byte since the connection opened
            self.transport.close()
            return
        timeout = self.limits.header_timeout_s
        self._refuse(RequestTimeout(f"the request headers did not arrive within {timeout:g} s"))

    def _refuse(self, error: GatewayError) -> None:
        """Answer ``error`` and close; a response still going out on this connection (a
        pipelined request's predecessor) ends first, and is the last."""
        self._refused = True
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._report(error)
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            return
        self.transport.write(refusal_response(error, self.server_state.default_headers))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)

    def _report(self, error: GatewayError) -> None:
        if self.report is None:
            return
        url = self.url if self._fields else None  # a field came after it: the target is whole
        method = self.parser.get_method().decode("ascii", "replace") if self._fields else ""
        self.report(error, method, url, time.monotonic() - self._head_started)


def protocol_class(
    server: ServerSettings, app: FastAPI | None = None
) -> type[LimitedHttpToolsProtocol]:
    """The protocol ``mmgw serve`` passes to uvicorn (``http=``): ``server``'s limits, its
    refusals counted in ``app``'s metrics."""

    class GatewayHttpProtocol(LimitedHttpToolsProtocol):
        limits = HttpLimits.of(server)
        report = RefusalReport(app)

    return GatewayHttpProtocol
