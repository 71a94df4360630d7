"""A generation request -> the ``InferInput`` list its model declares. Pure, no I/O.

Every model has ``max_batch_size > 0``, so each tensor carries a batch dimension of 1 in
front of its declared dims: a scalar declared ``dims: [1]`` goes on the wire as [1, 1].
Fields the model does not declare are left out. What a model cannot take at all (images, a
LoRA adapter, a guide its deployment declares no input for) was refused before the first
byte (``pipeline/admission.py``); here it is only asserted. Arrays go in the dtype the model
declares (fp16 pixels become bf16 for a CogVLM-style BF16 input) and at its rank: a tensor with
fewer axes gains leading image axes after the batch axis, one with more loses single ones.
"""

from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np
import tritonclient.grpc.aio as grpcclient

from gateway.errors import InvalidRequest
from gateway.families.calls import GenerationRequest, NamedCall, Sampling
from gateway.triton.contract import ModelContract

# Neutral scalar fields -> (numpy dtype, wire dtype).
_SCALARS: dict[str, tuple[type, str]] = {
    "max_tokens": (np.int32, "INT32"),
    "min_tokens": (np.int32, "INT32"),
    "end_id": (np.int32, "INT32"),
    "pad_id": (np.int32, "INT32"),
    "presence_penalty": (np.float32, "FP32"),
    "frequency_penalty": (np.float32, "FP32"),
    "repetition_penalty": (np.float32, "FP32"),
    "beam_width": (np.int32, "INT32"),
    "prompt_table_extra_id": (np.uint64, "UINT64"),
    "lora_task_id": (np.uint64, "UINT64"),
}
# Wire dtype -> numpy dtype, for arrays sent in whatever type the model declares.
_NUMPY: dict[str, type | np.dtype[Any]] = {
    "FP16": np.float16,
    "FP32": np.float32,
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT64": np.uint64,
}
_SAMPLING: dict[str, tuple[type, str]] = {
    "temperature": (np.float32, "FP32"),
    "top_k": (np.int32, "INT32"),
    "top_p": (np.float32, "FP32"),
    "seed": (np.uint64, "UINT64"),
}


def sampling_values(sampling: Sampling) -> dict[str, float | int]:
    """OpenAI's sampling -> TensorRT-LLM's, for every endpoint and family.

    Greedy (temperature 0) is ``top_k`` 1, TensorRT-LLM's greedy path, with ``top_p`` 0 and
    ``temperature`` 1.0, which has no effect there (samplers that divide by it never see 0).
    Otherwise the request's values, with OpenAI's defaults (temperature 1, top_p 1) and no
    top-k limit (0) unless asked. A seed is sent only when the request names one.
    """
    values: dict[str, float | int] = (
        {"temperature": 1.0, "top_k": 1, "top_p": 0.0}
        if sampling.greedy
        else {
            "temperature": 1.0 if sampling.temperature is None else sampling.temperature,
            "top_k": sampling.top_k or 0,
            "top_p": 1.0 if sampling.top_p is None else sampling.top_p,
        }
    )
    if sampling.seed is not None:
        values["seed"] = sampling.seed
    return values


def _tensor(name: str, datatype: str, array: np.ndarray[Any, Any]) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def _raw_tensor(name: str, datatype: str, raw: bytes) -> grpcclient.InferInput:
    """A [1, 1] tensor from its wire bytes, as ``set_data_from_numpy`` would store them
    (``_raw_content``, tritonclient/grpc/_infer_input.py) without the numpy round trip and
    checks for arrays this module made itself: about 8 us of the 130 a request spends before
    its Triton call (``python -m bench hotpath --idle-ms``), for each per-request tensor."""
    tensor = grpcclient.InferInput(name, [1, 1], datatype)
    tensor._raw_content = raw
    return tensor


def _text_tensor(name: str, text: str) -> grpcclient.InferInput:
    """One BYTES element: its 4-byte little-endian length, then its UTF-8 bytes (Triton's
    serialisation of a BYTES tensor, tritonclient.utils.serialize_byte_tensor)."""
    data = text.encode("utf-8")
    return _raw_tensor(name, "BYTES", len(data).to_bytes(4, "little") + data)


# Scalars whose value is new on almost every request: a sampled request's fresh seed, an
# image's content-derived KV-reuse id. Built per request; cached, each would only push the
# repeating scalars out of the cache, so that every request built all of its scalars again.
_FRESH_VALUES = frozenset({"seed", "prompt_table_extra_id"})


def _scalar(
    field_name: str, name: str, np_dtype: type, datatype: str, value: object
) -> grpcclient.InferInput:
    """``field_name``'s [1, 1] tensor: shared when its values repeat, built when fresh."""
    if field_name in _FRESH_VALUES:
        return _raw_tensor(name, datatype, np.array(value, dtype=np_dtype).tobytes())
    return _scalar_tensor(name, datatype, np_dtype, value)


@functools.lru_cache(maxsize=1024)
def _scalar_tensor(
    name: str, datatype: str, np_dtype: type, value: object
) -> grpcclient.InferInput:
    """A scalar [1, 1] tensor, built once per distinct value and then shared by requests.

    Most scalars repeat on every request (flags, sampling defaults, end and pad ids); an
    ``InferInput`` is only read when a request is serialised, so one object serves them all
    and saves building about ten of them (numpy array, protobuf) per request.
    """
    return _tensor(name, datatype, np.array([[value]], dtype=np_dtype))


def build_inputs(
    request: GenerationRequest, contract: ModelContract
) -> list[grpcclient.InferInput]:
    """The tensors for ``request``, named and typed as ``contract`` declares them."""
    inputs = [_text_tensor("text_input", request.text_input)]
    for field_name, (np_dtype, datatype) in _SCALARS.items():
        value = getattr(request, field_name)
        name = contract.input_name(field_name)
        if value is None or name is None:
            continue
        inputs.append(_scalar(field_name, name, np_dtype, datatype, value))
    inputs.extend(_sampling_tensors(request.sampling, contract))
    if request.stop_words and contract.declares("stop_words"):
        words = np.array([[w.encode("utf-8") for w in request.stop_words]], dtype=np.object_)
        inputs.append(_tensor("stop_words", "BYTES", words))
    flags = {"stream": request.stream, **dict.fromkeys(request.extra_flags, True)}
    for flag, value in flags.items():
        if contract.declares(flag):
            inputs.append(_scalar_tensor(flag, "BOOL", np.bool_, value))
    if request.decoder_text_input is not None and contract.declares("decoder_text_input"):
        inputs.append(_text_tensor("decoder_text_input", request.decoder_text_input))
    if request.images is not None:
        inputs.append(_image_tensor(*request.images, contract))
    if request.image_sizes is not None and request.image_sizes[0] in contract.inputs:
        inputs.append(_declared_tensor(*request.image_sizes, contract))
    inputs.extend(_lora_tensors(request, contract))
    inputs.extend(_guide_tensors(request, contract))
    return inputs


GUIDE_INPUTS = ("guided_decoding_guide_type", "guided_decoding_guide")


def _guide_tensors(
    request: GenerationRequest, contract: ModelContract
) -> list[grpcclient.InferInput]:
    """TensorRT-LLM's guided decoding inputs, one BYTES element each ([1, 1]); the guide text
    only when the type takes one (``json`` does not). The pipeline refused a guided request
    to a model that does not declare them, naming the request's field."""
    guide = request.guide
    if guide is None:
        return []
    # Admitted: structured/guides.check_guide refused a guide to a model without these.
    assert all(contract.declares(name) for name in GUIDE_INPUTS), "guide to an unguided model"
    tensors = [_text_tensor(GUIDE_INPUTS[0], guide.type)]
    if guide.text:
        tensors.append(_text_tensor(GUIDE_INPUTS[1], guide.text))
    return tensors


def _sampling_tensors(
    sampling: Sampling | None, contract: ModelContract
) -> list[grpcclient.InferInput]:
    if sampling is None:
        return []
    tensors = []
    for field_name, value in sampling_values(sampling).items():
        name = contract.input_name(field_name)
        if name is not None:
            np_dtype, datatype = _SAMPLING[field_name]
            tensors.append(_scalar(field_name, name, np_dtype, datatype, value))
    return tensors


def named_inputs(call: NamedCall, contract: ModelContract) -> list[grpcclient.InferInput]:
    """A family's own wire arrays, those the model declares, in the dtypes it declares."""
    contract.require(call.required, f"the contract this family's calls need ({contract.name})")
    inputs = [
        _declared_tensor(name, array, contract)
        for name, array in call.arrays.items()
        if name in contract.inputs
    ]
    return inputs + _sampling_tensors(call.sampling, contract)


def _lora_tensors(
    request: GenerationRequest, contract: ModelContract
) -> list[grpcclient.InferInput]:
    """``lora_weights`` and ``lora_config`` with a task id's first request (``lora_task_id``
    itself goes with the scalars)."""
    if request.lora_task_id is None:
        return []
    # Admitted: pipeline/admission.admit refused an adapter to a deployment without LoRA inputs.
    assert contract.declares("lora_task_id"), "LoRA adapter to a deployment without LoRA inputs"
    tensors = []
    for name, array in (
        ("lora_weights", request.lora_weights),
        ("lora_config", request.lora_config),
    ):
        if array is not None and name in contract.inputs:
            tensors.append(_declared_tensor(name, array, contract))
    return tensors


def _image_tensor(
    name: str, array: np.ndarray[Any, Any], contract: ModelContract
) -> grpcclient.InferInput:
    spec = contract.inputs.get(name)
    # Admitted: pipeline/admission.admit refused images to a deployment without this input.
    assert spec is not None, f"images to a deployment without {name!r}"
    try:
        return _declared_tensor(name, array, contract)
    except ValueError:
        # Admitted: admit refused more images than the declared dims carry (several images
        # to a v0.19 ensemble declaring [3, -1, -1]: ``Capabilities.tensor_max_images``).
        # What is left is known only once the image is prepared: a tensor whose extra axis
        # is not the image count (one image's anyres tiles) on dims without room for it.
        raise InvalidRequest(
            f"this model's Triton deployment declares {name!r} with dims {list(spec.dims)}: "
            f"it cannot take a tensor of shape {list(array.shape)} (one image per request?)",
            code="too_many_media_items",
        ) from None


def _declared_tensor(
    name: str, array: np.ndarray[Any, Any], contract: ModelContract
) -> grpcclient.InferInput:
    """``array`` as the model declares ``name``: its dtype and its rank (batch axis first)."""
    spec = contract.inputs[name]
    array = fit_rank(array, len(spec.dims) + 1)
    np_dtype = _NUMPY.get(spec.datatype)
    if np_dtype is not None and array.dtype != np_dtype:
        array = array.astype(np_dtype)
    return _tensor(name, spec.datatype, np.ascontiguousarray(array))


def fit_rank(array: np.ndarray[Any, Any], rank: int) -> np.ndarray[Any, Any]:
    """Insert (or drop single) axes right after the batch axis until ``array`` has ``rank``.

    One image's patches [1, 1, P, D] meet a deployment declaring [-1, -1, -1, -1] as
    [1, 1, 1, P, D]; one image's sizes [1, 1, 2] meet dims [2] as [1, 2].
    """
    while array.ndim < rank:
        array = array[:, np.newaxis]
    while array.ndim > rank and array.ndim > 1 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != rank:
        raise ValueError(f"cannot fit shape {array.shape} to rank {rank}")
    return array
