"""Whisper tensors for both contracts, named as the model declares them; outputs read back."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2

from gateway.errors import UpstreamUnavailable
from gateway.triton.contract import parse_model_config
from gateway.triton.speech import (
    BlsCall,
    DirectCall,
    bls_inputs,
    contract_kind,
    direct_inputs,
    output_ids,
    transcript,
)

DIRECT_NEW = [
    ("encoder_input_features", "TYPE_FP16", [-1, -1]),
    ("encoder_output_lengths", "TYPE_INT32", [1]),
    ("input_lengths", "TYPE_INT32", [1]),
    ("request_output_len", "TYPE_INT32", [1]),
    ("decoder_input_ids", "TYPE_INT32", [-1]),
    ("end_id", "TYPE_INT32", [1]),
    ("pad_id", "TYPE_INT32", [1]),
    ("streaming", "TYPE_BOOL", [1]),
    ("runtime_top_k", "TYPE_INT32", [1]),
    ("runtime_top_p", "TYPE_FP32", [1]),
    ("temperature", "TYPE_FP32", [1]),
    ("random_seed", "TYPE_UINT64", [1]),
    ("exclude_input_in_output", "TYPE_BOOL", [1]),
]


def contract(entries):
    inputs = [{"name": n, "data_type": t, "dims": d} for n, t, d in entries]
    return parse_model_config({"name": "tensorrt_llm", "input": inputs})


def _by_name(inputs: list[grpcclient.InferInput]) -> dict[str, grpcclient.InferInput]:
    return {tensor.name(): tensor for tensor in inputs}


def call(**overrides) -> DirectCall:
    fields = {
        "features": np.zeros((1, 3000, 80), np.float16),
        "prompt": (50258, 50259, 50359, 50363),
        "max_new_tokens": 110,
        "end_id": 50257,
        "stream": True,
    }
    return DirectCall(**{**fields, **overrides})


def test_direct_inputs_follow_the_declared_names() -> None:
    tensors = _by_name(direct_inputs(call(temperature=0.7, seed=9), contract(DIRECT_NEW)))
    assert tensors["encoder_input_features"].shape() == [1, 3000, 80]
    assert tensors["encoder_input_features"].datatype() == "FP16"
    assert tensors["decoder_input_ids"].shape() == [1, 4]
    assert tensors["input_lengths"].shape() == [1, 1]
    expected = {"runtime_top_k", "runtime_top_p", "random_seed", "exclude_input_in_output",
                "encoder_output_lengths", "pad_id", "end_id", "streaming"}  # fmt: skip
    assert expected <= tensors.keys()
    assert "top_k" not in tensors and "beam_width" not in tensors


def test_direct_leaves_out_what_the_model_does_not_declare() -> None:
    minimal = contract(DIRECT_NEW[:5])
    names = set(_by_name(direct_inputs(call(), minimal)))
    assert names == {"encoder_input_features", "encoder_output_lengths", "input_lengths",
                     "request_output_len", "decoder_input_ids"}  # fmt: skip


def test_direct_refuses_a_non_fp16_encoder_and_missing_inputs() -> None:
    bf16 = [("encoder_input_features", "TYPE_BF16", [-1, -1]), *DIRECT_NEW[1:]]
    with pytest.raises(UpstreamUnavailable, match="FP16"):
        direct_inputs(call(), contract(bf16))
    with pytest.raises(UpstreamUnavailable, match="decoder_input_ids"):
        direct_inputs(call(), contract(DIRECT_NEW[:1]))


def test_bls_inputs() -> None:
    bls = contract([("WAV", "TYPE_FP32", [-1]), ("WAV_LENS", "TYPE_INT32", [1]),
                    ("TEXT_PREFIX", "TYPE_STRING", [1])])  # fmt: skip
    tensors = _by_name(bls_inputs(BlsCall(np.zeros(16000, np.float32), "<|en|>"), bls))
    assert tensors["WAV"].shape() == [1, 16000] and tensors["WAV_LENS"].shape() == [1, 1]
    assert tensors["TEXT_PREFIX"].datatype() == "BYTES"
    assert contract_kind(bls) == "bls" and contract_kind(contract(DIRECT_NEW)) == "direct"


def _result(**outputs: np.ndarray) -> service_pb2.ModelInferResponse:
    response = service_pb2.ModelInferResponse()
    for name, array in outputs.items():
        datatype = "BYTES" if array.dtype == np.object_ else "INT32"
        response.outputs.add(name=name, datatype=datatype, shape=array.shape)
        if array.dtype == np.object_:
            item = array.reshape(-1)[0]
            response.raw_output_contents.append(len(item).to_bytes(4, "little") + item)
        else:
            response.raw_output_contents.append(array.tobytes())
    return response


def test_output_ids_are_cut_to_sequence_length() -> None:
    ids = np.array([[[5, 6, 7, 50257, 50257]]], np.int32)
    assert output_ids(_result(output_ids=ids)) == [5, 6, 7, 50257, 50257]
    lengths = np.array([[3]], np.int32)
    assert output_ids(_result(output_ids=ids, sequence_length=lengths)) == [5, 6, 7]
    assert output_ids(_result(sequence_length=lengths)) == []


def test_transcript_text() -> None:
    value = np.array([[" héllo".encode()]], dtype=np.object_)
    assert transcript(_result(TRANSCRIPTS=value)) == " héllo"
    assert transcript(_result(output_ids=np.zeros((1, 1, 1), np.int32))) is None
