"""How Triton reads an inference request: checked against the model's config, then its inputs
as numpy. The fake Triton (``tests/fakes/triton.py``) reads every request through here.

The checks are Triton's own: every input declared by the model, in the declared datatype, of
rank 1 + len(dims) (batch first, at most ``max_batch_size``) with the fixed dims matching, no
input twice, every required input present, every requested output declared. A violation raises
``TritonRejected`` with the text of the error response Triton would send.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2
from tritonclient.utils import deserialize_bytes_tensor

# Triton config data type -> the wire datatype a request must use for it.
_WIRE = {
    "TYPE_STRING": "BYTES",
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_UINT64": "UINT64",
    "TYPE_FP16": "FP16",
    "TYPE_BF16": "BF16",
    "TYPE_FP32": "FP32",
}
_NUMPY = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
}


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the fake's Triton read it: inputs decoded to numpy, batch axis first."""

    model: str
    request_id: str
    inputs: dict[str, np.ndarray]
    outputs: tuple[str, ...]

    def scalar(self, name: str) -> Any:
        """The one value of a [1, 1] input (bytes decoded to str); None if not sent."""
        array = self.inputs.get(name)
        if array is None:
            return None
        value = array.reshape(-1)[0]
        return value.decode("utf-8") if isinstance(value, bytes) else value.item()

    def strings(self, name: str) -> list[str]:
        """A BYTES list input (``stop_words``) as strings."""
        array = self.inputs.get(name)
        return [] if array is None else [v.decode("utf-8") for v in array.reshape(-1)]


class TritonRejected(Exception):
    """An error response Triton sends for a request it cannot run."""


def read_request(
    request: service_pb2.ModelInferRequest, configs: Mapping[str, dict], unready: Container[str]
) -> tuple[ReceivedRequest, dict]:
    """Triton's checks of an inference request against the model's config, then its
    inputs as numpy."""
    model, rid = request.model_name, request.id
    prefix = f"[request id: {rid}] " if rid else ""
    config = configs.get(model)
    if config is None:
        raise TritonRejected(f"Request for unknown model: '{model}' is not found")
    if model in unready:
        raise TritonRejected(f"'{model}' version 1 is not at ready state")
    declared = {entry["name"]: entry for entry in config.get("input", [])}
    max_batch = int(config.get("max_batch_size", 0))
    if len(request.raw_input_contents) != len(request.inputs):
        raise TritonRejected(
            f"{prefix}expected {len(request.inputs)} raw input contents for model "
            f"'{model}', got {len(request.raw_input_contents)}"
        )
    decoded: dict[str, np.ndarray] = {}
    for tensor, raw in zip(request.inputs, request.raw_input_contents, strict=True):
        name, shape = tensor.name, [int(d) for d in tensor.shape]
        entry = declared.get(name)
        if entry is None:
            raise TritonRejected(f"{prefix}unexpected inference input '{name}' for model '{model}'")
        if name in decoded:
            raise TritonRejected(f"{prefix}input '{name}' is specified more than once")
        expected_type = _WIRE[entry["data_type"]]
        if tensor.datatype != expected_type:
            raise TritonRejected(
                f"{prefix}inference input '{name}' data-type is '{tensor.datatype}', but "
                f"model '{model}' expects '{expected_type}'"
            )
        dims = [int(d) for d in entry.get("dims", [])]
        full = ([-1] if max_batch > 0 else []) + dims
        fits = len(shape) == len(full) and all(
            want in (-1, got) for want, got in zip(full, shape, strict=True)
        )
        if not fits or (max_batch > 0 and not 1 <= shape[0] <= max_batch):
            raise TritonRejected(
                f"{prefix}unexpected shape for input '{name}' for model '{model}'. "
                f"Expected {full}, got {shape}"
            )
        decoded[name] = _decode(raw, tensor.datatype, shape, f"{prefix}input '{name}'")
    missing = [n for n, e in declared.items() if not e.get("optional") and n not in decoded]
    if missing:
        raise TritonRejected(
            f"{prefix}expected {len(declared)} inputs but got {len(decoded)} inputs for "
            f"model '{model}'; missing required inputs {missing}"
        )
    output_names = {entry["name"] for entry in config.get("output", [])}
    asked = tuple(output.name for output in request.outputs)
    for name in asked:
        if name not in output_names:
            raise TritonRejected(
                f"{prefix}unexpected inference output '{name}' for model '{model}'"
            )
    return ReceivedRequest(model, rid, decoded, asked), config


def _decode(raw: bytes, datatype: str, shape: list[int], what: str) -> np.ndarray:
    count = int(np.prod(shape)) if shape else 1
    if datatype == "BYTES":
        values = deserialize_bytes_tensor(raw) if raw else np.empty(0, np.object_)
        if values.size != count:
            raise TritonRejected(
                f"{what} holds {values.size} strings, its shape {shape} says {count}"
            )
        return values.reshape(shape)
    dtype = np.dtype(_NUMPY[datatype]) if datatype in _NUMPY else None
    if dtype is None:
        raise TritonRejected(f"{what}: datatype {datatype} is not served by this model")
    if len(raw) != count * dtype.itemsize:
        raise TritonRejected(
            f"{what}: unexpected total byte size {len(raw)}, expecting {count * dtype.itemsize}"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape)
