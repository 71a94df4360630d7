"""Whisper's wire arrays for both contracts, sent as the model declares them; outputs read back.

The arrays go through ``triton/tensors.named_inputs``, as the relay sends them, so the names,
dtypes and the inputs left out are those a real deployment would receive.
"""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient

from gateway.errors import UpstreamUnavailable
from gateway.families.calls import NamedCall, Sampling
from gateway.families.whisper import wire
from gateway.families.whisper.tokens import load_tokenizer
from gateway.triton.contract import parse_model_config
from gateway.triton.tensors import named_inputs

TOKENS = load_tokenizer("bytes", 99)
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


def direct_call(sampling: Sampling | None = None) -> NamedCall:
    arrays = wire.direct_arrays(
        np.zeros((1, 3000, 80), np.float16), (50258, 50259, 50359, 50363), 110, 50257, True
    )
    return NamedCall(
        arrays, wire.DIRECT_OUTPUTS, lambda: wire.DirectReader(TOKENS), "-w0",
        wire.DIRECT_REQUIRED, sampling,
    )  # fmt: skip


def test_direct_inputs_follow_the_declared_names() -> None:
    sampling = Sampling(temperature=0.7, seed=9)
    tensors = _by_name(named_inputs(direct_call(sampling), contract(DIRECT_NEW)))
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
    names = set(_by_name(named_inputs(direct_call(), minimal)))
    assert names == {"encoder_input_features", "encoder_output_lengths", "input_lengths",
                     "request_output_len", "decoder_input_ids"}  # fmt: skip


def test_a_deployment_missing_required_inputs_is_refused() -> None:
    with pytest.raises(UpstreamUnavailable, match="decoder_input_ids"):
        named_inputs(direct_call(), contract(DIRECT_NEW[:1]))


def test_bls_inputs() -> None:
    bls = contract([("WAV", "TYPE_FP32", [-1]), ("WAV_LENS", "TYPE_INT32", [1]),
                    ("TEXT_PREFIX", "TYPE_STRING", [1])])  # fmt: skip
    arrays = wire.bls_arrays(np.zeros(16000, np.float32), "<|en|>")
    call = NamedCall(arrays, wire.BLS_OUTPUTS, wire.BlsReader, "", wire.BLS_REQUIRED)
    tensors = _by_name(named_inputs(call, bls))
    assert tensors["WAV"].shape() == [1, 16000] and tensors["WAV_LENS"].shape() == [1, 1]
    assert tensors["TEXT_PREFIX"].datatype() == "BYTES"
    declared = frozenset(bls.inputs)
    assert wire.contract_kind(declared) == "bls"
    assert wire.contract_kind(frozenset(contract(DIRECT_NEW).inputs)) == "direct"


def test_output_ids_are_cut_to_sequence_length() -> None:
    ids = np.array([[[5, 6, 7, 50257, 50257]]], np.int32)
    assert wire.output_ids({"output_ids": ids}) == [5, 6, 7, 50257, 50257]
    lengths = np.array([[3]], np.int32)
    assert wire.output_ids({"output_ids": ids, "sequence_length": lengths}) == [5, 6, 7]
    assert wire.output_ids({"sequence_length": lengths}) == []


def test_transcript_text() -> None:
    value = np.array([[" héllo".encode()]], dtype=np.object_)
    assert wire.transcript_text({"TRANSCRIPTS": value}) == " héllo"
    assert wire.transcript_text({"output_ids": np.zeros((1, 1, 1), np.int32)}) is None


def test_direct_reader_decodes_utf8_split_across_tokens_and_stops_at_end_of_text() -> None:
    reader = wire.DirectReader(TOKENS)
    accent = TOKENS.encode("é")
    assert len(accent) == 2  # one token per byte in the byte vocabulary
    pieces = [reader.feed({"output_ids": np.array([[[token]]], np.int32)})
              for token in [*TOKENS.encode("a"), *accent, TOKENS.eot, 5]]  # fmt: skip
    assert "".join(pieces) == "aé" and pieces[1] == ""  # the first byte of é waits
    out = reader.close()
    assert out.text == "aé" and out.generated == 4  # the token after end-of-text is not read


def test_readers_drop_an_echoed_prompt_and_bls_pieces_are_growth() -> None:
    reader = wire.DirectReader(TOKENS, echoed=(1, 2))
    ids = np.array([[[1, 2, *TOKENS.encode("ok"), TOKENS.eot]]], np.int32)
    assert reader.feed({"output_ids": ids}) == "ok"
    bls = wire.BlsReader()
    growth = [bls.feed({"TRANSCRIPTS": np.array([[t.encode()]], dtype=np.object_)})
              for t in ("he", "hello", "hello there")]  # fmt: skip
    assert growth == ["he", "llo", " there"] and bls.close().text == "hello there"
