"""Triton's gRPC messages built from numpy arrays, as ``tritonserver`` serialises them.

A ``ModelInferResponse`` carries each output's name, wire datatype and shape, and its bytes in
``raw_output_contents`` (BYTES tensors as 4-byte little-endian lengths followed by the bytes,
``tritonclient.utils.serialize_byte_tensor``'s layout). The gateway reads exactly this.
"""

from __future__ import annotations

import numpy as np
from tritonclient.grpc import service_pb2
from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor


def wire_bytes(array: np.ndarray) -> bytes:
    """One tensor's raw contents as Triton sends them (BYTES length-prefixed, else C order)."""
    if array.dtype == np.object_:
        return serialize_byte_tensor(array).item()
    return np.ascontiguousarray(array).tobytes()


def infer_response(
    *, final: bool = False, model: str = "model", request_id: str = "", **outputs: np.ndarray
) -> service_pb2.ModelInferResponse:
    """One streamed response holding ``outputs``; ``final`` sets ``triton_final_response``."""
    response = service_pb2.ModelInferResponse(model_name=model, id=request_id)
    for name, array in outputs.items():
        array = np.asarray(array)
        datatype = np_to_triton_dtype(array.dtype)
        response.outputs.add(name=name, datatype=datatype, shape=list(array.shape))
        response.raw_output_contents.append(wire_bytes(array))
    response.parameters["triton_final_response"].bool_param = final
    return response
