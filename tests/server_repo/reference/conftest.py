"""gRPC handles on the session's tritonserver, one of each per test module."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2_grpc

from gateway.triton.embedded import EmbeddedTriton


@pytest.fixture(scope="module")
async def client(
    embedded_triton: EmbeddedTriton,
) -> AsyncIterator[grpcclient.InferenceServerClient]:
    """tritonclient's asyncio client: model readiness, configs, plain streams."""
    triton = grpcclient.InferenceServerClient(embedded_triton.grpc_url)
    yield triton
    await triton.close()


@pytest.fixture(scope="module")
async def stub(
    embedded_triton: EmbeddedTriton,
) -> AsyncIterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    """The raw service stub, for requests tritonclient cannot build (Triton's parameters)."""
    channel = grpc.aio.insecure_channel(embedded_triton.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    await channel.close()
