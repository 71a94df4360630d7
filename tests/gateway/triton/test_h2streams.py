"""grpclib's failures as the gateway's errors, and a Triton that is not there (a real closed
port): the same answers as the grpc.aio stream client gives."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from gateway.errors import InvalidRequest, UpstreamFailed, UpstreamUnavailable
from gateway.triton.client import H2_MAX_REQUEST_BYTES, TritonClient, failure_of
from gateway.triton.h2streams import H2Streams


def test_grpclib_failures_say_whether_triton_is_unreachable() -> None:
    describe = H2Streams.describe
    assert describe(GRPCError(Status.UNAVAILABLE, "x")) == (True, "x")
    assert describe(StreamTerminatedError("Connection lost")) == (True, "Connection lost")
    assert describe(ConnectionRefusedError(111, "refused"))[0]
    assert describe(GRPCError(Status.INVALID_ARGUMENT, "max_tokens must be > 0")) == (
        False,
        "max_tokens must be > 0",
    )
    assert describe(GRPCError(Status.INTERNAL)) == (False, "INTERNAL")


def test_their_text_is_read_as_grpc_errors_text_is() -> None:
    rejected = failure_of("max_tokens must be > 0")
    assert isinstance(rejected, InvalidRequest) and "must be > 0" in rejected.message
    assert isinstance(failure_of("the engine crashed"), UpstreamFailed)
    assert isinstance(failure_of("model is not ready"), UpstreamUnavailable)


def test_addresses_are_host_and_port() -> None:
    H2Streams("triton:8001").close()
    H2Streams("[::1]:8001").close()
    with pytest.raises(ValueError, match="host:port"):
        H2Streams("triton")


async def test_a_triton_that_is_not_listening_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = TritonClient(f"127.0.0.1:{port}", stream_client="h2")
    text = grpcclient.InferInput("text_input", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[b"hi"]], dtype=np.object_))
    try:
        with pytest.raises(UpstreamUnavailable):
            async for _ in client.stream("m", [text], "r1"):
                pass
    finally:
        await client.close()


def _tensor(name: str, array: np.ndarray) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(array.shape), "FP16")
    tensor.set_data_from_numpy(array)
    return tensor


async def test_auto_sends_requests_with_a_large_tensor_over_grpcio() -> None:
    text = grpcclient.InferInput("text_input", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[b"hi"]], dtype=np.object_))
    image = _tensor("image_input", np.zeros((1, 1, 3, 336, 336), np.float16))  # 677 kB
    small = _tensor("x", np.zeros(H2_MAX_REQUEST_BYTES // 2 - 8, np.float16))  # near the limit
    auto = TritonClient("127.0.0.1:1", stream_client="auto")
    h2 = TritonClient("127.0.0.1:1", stream_client="h2")
    grpcio = TritonClient("127.0.0.1:1")
    try:
        assert auto._takes_h2([text]) and auto._takes_h2([text, small])
        assert not auto._takes_h2([text, image])
        assert h2._takes_h2([text, image])  # "h2": every stream, whatever it carries
        assert grpcio._h2 is None
    finally:
        for client in (auto, h2, grpcio):
            await client.close()
