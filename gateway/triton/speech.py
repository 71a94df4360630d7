"""Whisper's two Triton contracts: request tensors in, token ids or transcripts out. Pure.

``DirectCall`` fills TensorRT-LLM's encoder-decoder ``tensorrt_llm`` model: fp16 log-mel
``encoder_input_features`` ``[1, 3000, n_mels]``, ``input_lengths`` (3000),
``encoder_output_lengths`` (1500, the encoder halves the frames), ``decoder_input_ids``,
``request_output_len``, ``end_id``/``pad_id``, ``streaming`` and the sampling inputs, under
whichever names the model declares (``runtime_top_k`` or ``top_k``, ``seed`` or
``random_seed``). ``BlsCall`` fills NVIDIA's ``whisper_bls``: ``WAV``, ``WAV_LENS`` (declared
optional but always read) and ``TEXT_PREFIX``. As everywhere, each tensor carries a batch
dimension of 1 in front of its declared dims.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2

from gateway.errors import UpstreamUnavailable
from gateway.triton.contract import ModelContract
from gateway.triton.responses import output_array

DIRECT_REQUIRED = ("encoder_input_features", "decoder_input_ids", "request_output_len")
BLS_REQUIRED = ("WAV", "TEXT_PREFIX")
DIRECT_OUTPUTS = ("output_ids", "sequence_length")
BLS_OUTPUTS = ("TRANSCRIPTS",)
_ALIASES = {
    "top_k": ("runtime_top_k", "top_k"),
    "top_p": ("runtime_top_p", "top_p"),
    "seed": ("seed", "random_seed"),
}


@dataclass(frozen=True)
class DirectCall:
    """One window for the encoder-decoder model."""

    features: np.ndarray  # fp16 [1, frames, n_mels]
    prompt: tuple[int, ...]
    max_new_tokens: int
    end_id: int
    stream: bool
    temperature: float = 0.0
    seed: int | None = None

    @property
    def frames(self) -> int:
        return int(self.features.shape[1])


@dataclass(frozen=True)
class BlsCall:
    """One window for ``whisper_bls``: samples and the decoder prompt as text."""

    samples: np.ndarray  # float32 [n], 16 kHz
    text_prefix: str


def _tensor(name: str, datatype: str, array: np.ndarray) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(np.ascontiguousarray(array))
    return tensor


def _declared(contract: ModelContract, field: str) -> str | None:
    return next((n for n in _ALIASES.get(field, (field,)) if n in contract.inputs), None)


def _check(contract: ModelContract, required: tuple[str, ...], kind: str) -> None:
    missing = [name for name in required if name not in contract.inputs]
    if missing:
        raise UpstreamUnavailable(
            f"Triton model {contract.name!r} does not declare {missing}: not Whisper's {kind}"
        )


def _sampling(call: DirectCall) -> dict[str, tuple[str, np.ndarray]]:
    """TensorRT-LLM's sampling inputs: top_k 1 is greedy; otherwise plain temperature."""
    greedy = call.temperature <= 0
    values: dict[str, tuple[str, np.ndarray]] = {
        "temperature": ("FP32", np.array([[call.temperature if not greedy else 1.0]], np.float32)),
        "top_k": ("INT32", np.array([[1 if greedy else 0]], np.int32)),
        "top_p": ("FP32", np.array([[0.0 if greedy else 1.0]], np.float32)),
    }
    if call.seed is not None:
        values["seed"] = ("UINT64", np.array([[call.seed]], np.uint64))
    return values


def direct_inputs(call: DirectCall, contract: ModelContract) -> list[grpcclient.InferInput]:
    """The tensors for one window, named as ``contract`` declares them."""
    _check(contract, DIRECT_REQUIRED, "encoder-decoder contract")
    spec = contract.inputs["encoder_input_features"]
    if spec.datatype != "FP16":
        raise UpstreamUnavailable(
            f"{contract.name!r} declares encoder_input_features as {spec.datatype}; Whisper "
            "engines take FP16 (encoder_input_features_data_type: TYPE_FP16)"
        )
    scalar = np.int32
    inputs = [
        _tensor("encoder_input_features", "FP16", call.features),
        _tensor("decoder_input_ids", "INT32", np.array([call.prompt], np.int32)),
        _tensor("request_output_len", "INT32", np.array([[call.max_new_tokens]], scalar)),
    ]
    optional: dict[str, tuple[str, np.ndarray]] = {
        "input_lengths": ("INT32", np.array([[call.frames]], scalar)),
        "encoder_output_lengths": ("INT32", np.array([[call.frames // 2]], scalar)),
        "decoder_input_lengths": ("INT32", np.array([[len(call.prompt)]], scalar)),
        "end_id": ("INT32", np.array([[call.end_id]], scalar)),
        "pad_id": ("INT32", np.array([[call.end_id]], scalar)),  # as NVIDIA's BLS sends
        "beam_width": ("INT32", np.array([[1]], scalar)),
        "streaming": ("BOOL", np.array([[call.stream]], np.bool_)),
        "exclude_input_in_output": ("BOOL", np.array([[True]], np.bool_)),
        **_sampling(call),
    }
    for field, (datatype, array) in optional.items():
        name = _declared(contract, field)
        if name is not None:
            inputs.append(_tensor(name, datatype, array))
    return inputs


def bls_inputs(call: BlsCall, contract: ModelContract) -> list[grpcclient.InferInput]:
    """``WAV`` ``[1, n]``, ``WAV_LENS`` ``[1, 1]`` and ``TEXT_PREFIX`` ``[1, 1]``."""
    _check(contract, BLS_REQUIRED, "whisper_bls contract")
    samples = call.samples.astype(np.float32, copy=False)[None]
    prefix = np.array([[call.text_prefix.encode("utf-8")]], dtype=np.object_)
    inputs = [_tensor("WAV", "FP32", samples), _tensor("TEXT_PREFIX", "BYTES", prefix)]
    if "WAV_LENS" in contract.inputs:
        inputs.append(_tensor("WAV_LENS", "INT32", np.array([[samples.shape[1]]], np.int32)))
    return inputs


def output_ids(result: service_pb2.ModelInferResponse) -> list[int]:
    """Beam 0's token ids, cut to ``sequence_length`` when the response carries it."""
    ids = output_array(result, "output_ids")
    if ids is None or ids.size == 0:
        return []
    beam = ids.reshape(-1, ids.shape[-1])[0] if ids.ndim > 1 else ids
    lengths = output_array(result, "sequence_length")
    if lengths is not None and lengths.size:
        beam = beam[: max(0, int(lengths.reshape(-1)[0]))]
    return [int(t) for t in beam]


def transcript(result: service_pb2.ModelInferResponse) -> str | None:
    """The ``TRANSCRIPTS`` text of one ``whisper_bls`` response (None: not in this one)."""
    value = output_array(result, "TRANSCRIPTS")
    if value is None or value.size == 0:
        return None
    text = value.reshape(-1)[0]
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text)


def contract_kind(contract: ModelContract) -> str | None:
    """'direct' or 'bls' by the inputs a Whisper deployment declares; None: neither."""
    if all(name in contract.inputs for name in DIRECT_REQUIRED):
        return "direct"
    if all(name in contract.inputs for name in BLS_REQUIRED):
        return "bls"
    return None
