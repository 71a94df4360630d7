"""Triton's token streams over grpclib: HTTP/2 read on the event loop (the default for text).

Why: with grpc.aio every streamed response crosses threads. grpc's C core reads Triton's
socket in a poller thread, which then writes one byte to a socket pair per completed read; the
event loop wakes, reads that byte, runs the completion, and starts the next read. That is four
system calls and two thread hand-offs per token before the gateway's own code runs, and with
the socket write to the client, most of what a token costs (``bench/RESULTS.md``: profiles and
system call counts). grpclib parses HTTP/2 (the ``h2`` package) in the loop's own protocol: one
socket read delivers every frame that arrived, for every stream, and a stream's waiting task is
woken directly. On a saturated core that takes up to a third off the gateway's CPU per relayed
token (the receive path alone: up to half); under strace on the 16-core host, 1.4 system calls
per relayed token instead of grpc.aio's 6.4. On a quiet core it is about even, a read's frames
go out in a burst (first tokens wait behind it under flood), and a large tensor costs more to
send (16 kB frames through Python). So the default, ``upstream.stream_client = "auto"``, sends
requests with a large tensor over grpc.aio and every other stream this way
(``bench/RESULTS.md``, issue 28).

Only the token streams go this way; health, model configs and the replicas' probes keep
tritonclient's grpc.aio client. The wire is the same gRPC method (``ModelStreamInfer``: one
request message, the half-close, responses until Triton ends the call).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from grpclib.client import Channel
from grpclib.config import Configuration
from grpclib.const import Cardinality, Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError
from tritonclient.grpc import service_pb2

from gateway.triton.outputs import is_final

__all__ = ["H2Streams"]

_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


def _host_port(url: str) -> tuple[str, int]:
    host, _, port = url.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a Triton gRPC address is host:port, not {url!r}")
    return host.strip("[]"), int(port)


class H2Streams:
    """One HTTP/2 connection to one Triton (grpclib reconnects when it is lost)."""

    # What grpclib raises for a failed call, a lost connection or a refused one.
    errors = (GRPCError, StreamTerminatedError, ProtocolError, OSError)

    @staticmethod
    def describe(exc: BaseException) -> tuple[bool, str]:
        """For one of ``errors``: whether it says Triton cannot be reached (a retryable 503,
        as grpc's UNAVAILABLE) rather than that it refused or failed the request; its text."""
        if isinstance(exc, GRPCError):
            unavailable = exc.status in (Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED)
            return unavailable, exc.message or exc.status.name
        return isinstance(exc, StreamTerminatedError | OSError), str(exc)

    def __init__(self, url: str, keepalive_s: float = 0.0) -> None:
        host, port = _host_port(url)
        config = None
        if keepalive_s > 0:  # as the grpc.aio channel: a ping every keepalive_s, as long to answer
            config = Configuration(
                _keepalive_time=keepalive_s,
                _keepalive_timeout=keepalive_s,
                _http2_max_pings_without_data=0,
            )
        self._channel = Channel(host, port, config=config)

    def close(self) -> None:
        self._channel.close()

    async def responses(
        self, request: service_pb2.ModelInferRequest
    ) -> AsyncGenerator[service_pb2.ModelStreamInferResponse, None]:
        """Send ``request`` and half-close; Triton's responses up to the request's final one,
        then its end of the call (trailers) read, so a finished call is never reset. Left
        early (closed, cancelled), the stream is reset, which cancels the request in Triton."""
        async with self._channel.request(
            _METHOD,
            Cardinality.STREAM_STREAM,
            service_pb2.ModelInferRequest,
            service_pb2.ModelStreamInferResponse,
        ) as call:
            await call.send_message(request, end=True)
            async for response in call:
                yield response
                if response.error_message or is_final(response.infer_response):
                    break
