"""NVIDIA's ``llmapi`` Triton model: an ``LlmapiRequest`` -> its inputs; its responses read.

The contract is TensorRT-LLM's ``triton_backend/all_models/llmapi/tensorrt_llm/``
(config.pbtxt @0a71057313ec0626527e164a8fc0205c5822e2f5, 1/helpers.py
@0df60f9ad779c4dc4f55da07e08b969fc4684e56, 1/model.py @044a90d209e380c95e23e8ae42f3583fa05ada78):

- ``max_batch_size: 0``: no batch dimension. ``text_input`` goes as ``[1]``, ``image_url`` as
  ``[N]`` (one ``data:`` URI per image), ``sampling_param_stop`` as ``[K]``, every scalar as
  ``[1]``; each in the dtype the deployment's config declares.
- ``helpers.get_sampling_params_from_request`` reads ``sampling_param_<name>`` for best_of,
  temperature, top_k, top_p, frequency_penalty, presence_penalty, max_tokens, seed,
  exclude_input_from_output, return_perf_metrics, and stop; nothing else (no guided decoding, no
  per-token log probabilities, no repetition penalty, no min_tokens). A field the request sets
  whose input the deployment does not declare is a 400 naming the input.
- ``exclude_input_from_output`` defaults to False there (the prompt would be echoed): always
  sent True. ``return_perf_metrics`` makes ``kv_cache_reused_block`` come back;
  ``return_finish_reason`` / ``return_stop_reason`` make ``finish_reason`` / ``stop_reason``
  come back (absent otherwise).
- Outputs: ``text_output`` is the whole text so far on every streamed response (cumulative);
  ``finish_reason`` is TensorRT-LLM's (``stop``, ``length``, ``timeout``, ``cancelled``, or
  ``None`` before the end), written with ``str()``; NVIDIA's model.py writes the KV-cache
  counters in ``text_output``'s dtype (BYTES) although the config declares INT32, so both
  are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2

from gateway.errors import InvalidRequest
from gateway.families.calls import LlmapiRequest
from gateway.triton.contract import ModelContract
from gateway.triton.outputs import first_int, first_string

_NUMPY: dict[str, Any] = {
    "BOOL": np.bool_,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT64": np.uint64,
    "FP32": np.float32,
    "FP16": np.float16,
    "BYTES": np.object_,
}
# Flags the gateway always wants, sent when the deployment declares them.
_FLAGS = (
    "sampling_param_exclude_input_from_output",
    "sampling_param_return_perf_metrics",
    "return_finish_reason",
    "return_stop_reason",
)
# The OpenAI field each sampling input carries, for the refusal that names both.
FIELDS = {
    "sampling_param_temperature": "temperature",
    "sampling_param_top_p": "top_p",
    "sampling_param_top_k": "top_k",
    "sampling_param_seed": "seed",
    "sampling_param_frequency_penalty": "frequency_penalty",
    "sampling_param_presence_penalty": "presence_penalty",
    "sampling_param_best_of": "best_of",
    "sampling_param_max_tokens": "max_tokens",
    "sampling_param_stop": "stop",
    "image_url": "messages",
    "streaming": "stream",
}


def _scalars(request: LlmapiRequest) -> Iterator[tuple[str, object]]:
    """(input, value) of every scalar the request sets."""
    sampling = request.sampling
    values: dict[str, object] = {
        "sampling_param_max_tokens": request.max_tokens,
        "sampling_param_temperature": sampling.temperature,
        "sampling_param_top_p": sampling.top_p,
        "sampling_param_top_k": sampling.top_k,
        "sampling_param_seed": sampling.seed,
        "sampling_param_frequency_penalty": request.frequency_penalty,
        "sampling_param_presence_penalty": request.presence_penalty,
        "sampling_param_best_of": request.best_of,
    }
    for name, value in values.items():
        if value is not None:
            yield name, value


def require(contract: ModelContract, name: str, model: str) -> None:
    """A 400 naming the input and the request field when the deployment lacks ``name``."""
    if name not in contract.inputs:
        field = FIELDS.get(name, name)
        raise InvalidRequest(
            f"model '{model}' (NVIDIA's llmapi Triton model {contract.name!r}) declares no "
            f"{name!r} input: it cannot take '{field}'",
            param=field,
            code="unsupported_parameter",
        )


def _tensor(name: str, values: list[Any], contract: ModelContract) -> grpcclient.InferInput:
    """``values`` as the one-axis tensor the config declares (no batch axis), in its dtype."""
    datatype = contract.inputs[name].datatype
    array = np.array(values, dtype=_NUMPY.get(datatype, np.object_))
    tensor = grpcclient.InferInput(name, [len(values)], datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def llmapi_inputs(
    request: LlmapiRequest, contract: ModelContract, model: str
) -> list[grpcclient.InferInput]:
    """The tensors of one call, checked against what the deployment declares."""
    inputs = [_tensor("text_input", [request.text_input.encode("utf-8")], contract)]
    if request.image_urls:
        require(contract, "image_url", model)
        urls = [url.encode("ascii") for url in request.image_urls]
        inputs.append(_tensor("image_url", urls, contract))
    if request.stream:
        require(contract, "streaming", model)
        inputs.append(_tensor("streaming", [True], contract))
    for name, value in _scalars(request):
        require(contract, name, model)
        inputs.append(_tensor(name, [value], contract))
    if request.stop:
        require(contract, "sampling_param_stop", model)
        stops = [stop.encode("utf-8") for stop in request.stop]
        inputs.append(_tensor("sampling_param_stop", stops, contract))
    inputs.extend(_tensor(flag, [True], contract) for flag in _FLAGS if flag in contract.inputs)
    return inputs


@dataclass(frozen=True)
class LlmapiResponse:
    """One response of the llmapi model: the text so far (streamed) and its end, if it ended."""

    text: str
    final: bool
    finish_reason: str | None  # TensorRT-LLM's, None before the end or when not returned
    stop_reason: str | None
    reused_blocks: int | None


def llmapi_response(raw: service_pb2.ModelInferResponse) -> LlmapiResponse:
    """Read one response straight from its protobuf (once per streamed token), as
    ``outputs.text_response`` reads the engine path's."""
    final_param = raw.parameters.get("triton_final_response")
    final = bool(final_param.bool_param) if final_param is not None else False
    contents = raw.raw_output_contents
    values: dict[str, str | int | None] = {}
    for index, output in enumerate(raw.outputs):
        if output.name not in _READ or index >= len(contents):
            continue
        if output.datatype == "BYTES":
            values[output.name] = first_string(contents[index])
        else:
            values[output.name] = first_int(contents[index], output.datatype)
    finish, stop = values.get("finish_reason"), values.get("stop_reason")
    return LlmapiResponse(
        str(values.get("text_output") or ""),
        final,
        None if finish in (None, "", "None") else str(finish),
        None if stop in (None, "", "None") else str(stop),
        _integer(values.get("kv_cache_reused_block")),
    )


_READ = frozenset({"text_output", "finish_reason", "stop_reason", "kv_cache_reused_block"})


def _integer(value: str | int | None) -> int | None:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return value
