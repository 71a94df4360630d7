"""A generation request -> the ``InferInput`` list its model declares. Pure, no I/O.

Every model has ``max_batch_size > 0``, so each tensor carries a batch dimension of 1 in
front of its declared dims: a scalar declared ``dims: [1]`` goes on the wire as [1, 1].
Fields the model does not declare are left out, except the image tensor a request needs,
whose absence is a client-visible error (the model cannot see images).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import tritonclient.grpc.aio as grpcclient

from gateway.errors import InvalidRequest
from gateway.triton.contract import ModelContract

# Neutral scalar fields -> (numpy dtype, wire dtype).
_SCALARS: dict[str, tuple[type, str]] = {
    "max_tokens": (np.int32, "INT32"),
    "temperature": (np.float32, "FP32"),
    "top_k": (np.int32, "INT32"),
    "top_p": (np.float32, "FP32"),
    "seed": (np.uint64, "UINT64"),
    "min_tokens": (np.int32, "INT32"),
    "end_id": (np.int32, "INT32"),
    "pad_id": (np.int32, "INT32"),
    "presence_penalty": (np.float32, "FP32"),
    "frequency_penalty": (np.float32, "FP32"),
    "repetition_penalty": (np.float32, "FP32"),
    "beam_width": (np.int32, "INT32"),
    "prompt_table_extra_id": (np.uint64, "UINT64"),
}
_FLAGS = ("stream", "return_num_input_tokens", "return_num_output_tokens", "return_perf_metrics")


@dataclass(frozen=True)
class GenerationRequest:
    """Everything the gateway decided for one request, in neutral names."""

    text_input: str
    max_tokens: int
    stream: bool = True
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    min_tokens: int | None = None
    end_id: int | None = None
    pad_id: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    beam_width: int | None = 1
    prompt_table_extra_id: int | None = None
    stop_words: Sequence[str] = ()
    images: tuple[str, np.ndarray] | None = None  # (tensor name, wire array with batch dim)
    extra_flags: Sequence[str] = field(default=_FLAGS[1:])


def _tensor(name: str, datatype: str, array: np.ndarray) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def build_inputs(
    request: GenerationRequest, contract: ModelContract
) -> list[grpcclient.InferInput]:
    """The tensors for ``request``, named and typed as ``contract`` declares them."""
    text = np.array([[request.text_input.encode("utf-8")]], dtype=np.object_)
    inputs = [_tensor("text_input", "BYTES", text)]
    for field_name, (np_dtype, datatype) in _SCALARS.items():
        value = getattr(request, field_name)
        name = contract.input_name(field_name)
        if value is None or name is None:
            continue
        inputs.append(_tensor(name, datatype, np.array([[value]], dtype=np_dtype)))
    if request.stop_words and contract.declares("stop_words"):
        words = np.array([[w.encode("utf-8") for w in request.stop_words]], dtype=np.object_)
        inputs.append(_tensor("stop_words", "BYTES", words))
    flags = {"stream": request.stream, **dict.fromkeys(request.extra_flags, True)}
    for flag, value in flags.items():
        if contract.declares(flag):
            inputs.append(_tensor(flag, "BOOL", np.array([[value]], dtype=np.bool_)))
    if request.images is not None:
        inputs.append(_image_tensor(*request.images, contract))
    return inputs


def _image_tensor(name: str, array: np.ndarray, contract: ModelContract) -> grpcclient.InferInput:
    spec = contract.inputs.get(name)
    if spec is None:
        raise InvalidRequest(
            f"this model's Triton deployment declares no {name!r} input: it cannot take images",
            code="images_not_supported",
        )
    expected_rank = len(spec.dims) + 1
    if array.ndim != expected_rank:
        raise ValueError(f"{name} must have rank {expected_rank}, got shape {array.shape}")
    return _tensor(name, spec.datatype, np.ascontiguousarray(array))
