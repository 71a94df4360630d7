"""gRPC streaming helpers for the real-Triton reference model tests.

The asyncio ``tritonclient`` cannot ask for Triton's empty final response (its
``stream_infer`` takes dicts and rejects ``triton_*`` parameters), so these helpers build the
``ModelInferRequest`` protobuf themselves and set ``triton_enable_empty_final_response``, which
lets the tests check that every stream ends with the empty final response.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np
from tritonclient.grpc import InferResult, service_pb2, service_pb2_grpc
from tritonclient.utils import np_to_triton_dtype

from tests.fakes.triton_wire import wire_bytes


def one(value: Any, dtype: Any) -> np.ndarray:
    return np.array([[value]], dtype=dtype)


def tensors(text: str, max_tokens: int, **extra: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "text_input": one(text.encode(), np.object_),
        "max_tokens": one(max_tokens, np.int32),
        **extra,
    }


def infer_request(model: str, tensors: Mapping[str, np.ndarray]) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, array in tensors.items():
        request.inputs.add(name=name, datatype=np_to_triton_dtype(array.dtype), shape=array.shape)
        request.raw_input_contents.append(wire_bytes(array))
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


async def stream(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    model: str,
    tensors: Mapping[str, np.ndarray],
    timeout_s: float = 60.0,
) -> tuple[list[InferResult], str | None]:
    """Send one request; collect responses up to the empty final one (or the first error)."""
    finished = asyncio.Event()

    async def requests() -> AsyncIterator[service_pb2.ModelInferRequest]:
        yield infer_request(model, tensors)
        await finished.wait()

    call = stub.ModelStreamInfer(requests())
    results: list[InferResult] = []
    error: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async for response in call:
                if response.error_message:
                    error = response.error_message
                    break
                results.append(InferResult(response.infer_response))
                if response.infer_response.parameters["triton_final_response"].bool_param:
                    break
    finally:
        finished.set()
        call.cancel()
    return results, error


def texts(results: list[InferResult]) -> list[str]:
    return [r.as_numpy("text_output")[0, 0].decode() for r in results[:-1]]


def int_output(result: InferResult, name: str) -> int:
    return int(result.as_numpy(name)[0, 0])
