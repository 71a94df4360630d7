"""Reading Triton's streamed responses: the text and counters of the token path, any output
as an array. Pure: each function takes one ``ModelInferResponse`` protobuf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2

_COUNTERS = frozenset({"num_input_tokens", "num_output_tokens", "kv_cache_reused_blocks"})
_INT_WIDTHS = {"INT32": 4, "INT64": 8, "UINT32": 4, "UINT64": 8, "INT16": 2, "INT8": 1}


class TritonResponse(NamedTuple):
    """One streamed response: its text and whichever counters the model returned. A tuple,
    not a frozen dataclass: one is made per token, and a tuple is made in a third of the
    time (a frozen dataclass sets each field through ``object.__setattr__``)."""

    text: str
    final: bool
    has_output: bool
    counters: dict[str, int]


def is_final(raw: service_pb2.ModelInferResponse) -> bool:
    """Whether Triton flagged this response as the request's last."""
    final_param = raw.parameters.get("triton_final_response")
    return bool(final_param.bool_param) if final_param is not None else False


def text_response(raw: service_pb2.ModelInferResponse) -> TritonResponse:
    """Read one response straight from its protobuf: called once per token.

    ``InferResult.as_numpy`` scans every output and builds numpy arrays (an object array
    for BYTES) for each name asked; here one pass over the outputs decodes the first
    length-prefixed string of ``text_output`` and the counters from Triton's raw contents.
    An output sent another way (typed ``contents``, unusual in Triton's answers) falls back
    to ``as_numpy``.
    """
    final_param = raw.parameters.get("triton_final_response")
    final = bool(final_param.bool_param) if final_param is not None else False
    contents = raw.raw_output_contents
    text = ""
    has_output = False
    counters: dict[str, int] = {}
    for index, output in enumerate(raw.outputs):
        name = output.name
        if name == "text_output":
            has_output = True
            text = first_string(contents[index]) if index < len(contents) else _text_of(raw)
        elif name in _COUNTERS:
            value = first_int(contents[index], output.datatype) if index < len(contents) else None
            if value is None:
                value = _int_of(raw, name)
            if value is not None:
                counters[name] = value
    return TritonResponse(text, final, has_output, counters)


def first_string(data: bytes) -> str:
    """The first element of a serialised BYTES tensor (4-byte little-endian length, bytes)."""
    if len(data) < 4:
        return ""
    size = int.from_bytes(data[:4], "little")
    return data[4 : 4 + size].decode("utf-8", errors="replace")


def first_int(data: bytes, datatype: str) -> int | None:
    width = _INT_WIDTHS.get(datatype)
    if width is None or len(data) < width:
        return None
    return int.from_bytes(data[:width], "little", signed=not datatype.startswith("U"))


def _text_of(raw: service_pb2.ModelInferResponse) -> str:
    array = grpcclient.InferResult(raw).as_numpy("text_output")
    if array is None or not array.size:
        return ""
    value = array.reshape(-1)[0]
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _int_of(raw: service_pb2.ModelInferResponse, name: str) -> int | None:
    array = grpcclient.InferResult(raw).as_numpy(name)
    return int(np.asarray(array).reshape(-1)[0]) if array is not None and array.size else None


def output_array(raw: service_pb2.ModelInferResponse, name: str) -> np.ndarray[Any, Any] | None:
    """One output of a response as numpy (BYTES as an object array); None when absent."""
    array: np.ndarray[Any, Any] | None = grpcclient.InferResult(raw).as_numpy(name)
    return array


def output_arrays(
    raw: service_pb2.ModelInferResponse, names: Sequence[str]
) -> dict[str, np.ndarray[Any, Any]]:
    """The outputs ``names`` a response carries, as numpy (read through one ``InferResult``)."""
    result = grpcclient.InferResult(raw)
    arrays = {name: result.as_numpy(name) for name in names}
    return {name: array for name, array in arrays.items() if array is not None}


def token_scores(
    raw: service_pb2.ModelInferResponse,
) -> tuple[float | None, np.ndarray[Any, Any] | None]:
    """A streamed response's newest token: its log probability and its raw logits row.

    TensorRT-LLM's streamed ``output_log_probs`` ([1, beams, n]) holds every token so far, so
    the newest is the last; ``generation_logits`` ([1, n_new, beams, vocab]) holds only this
    response's token (docs/triton-contract.md section 8). Either is None when absent.
    """
    result = grpcclient.InferResult(raw)
    log_probs = result.as_numpy("output_log_probs")
    logits = result.as_numpy("generation_logits")
    log_prob = (
        float(log_probs.reshape(-1)[-1]) if log_probs is not None and log_probs.size else None
    )
    row = logits.reshape(-1, logits.shape[-1])[-1] if logits is not None and logits.size else None
    return log_prob, row
