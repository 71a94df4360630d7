"""Decoding one streamed response straight from its protobuf gives what ``as_numpy`` gives.

``text_response`` runs once per token, so it reads the raw contents itself; these tests pin it
to tritonclient's own decoding for every shape of answer Triton sends, and to the slow path
when an output comes as typed ``contents`` instead of raw bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.grpc import InferResult, service_pb2

from gateway.triton.outputs import text_response


def message(
    texts: list[bytes] | None,
    counters: dict[str, tuple[str, int]] | None = None,
    final: bool | None = None,
) -> service_pb2.ModelInferResponse:
    response = service_pb2.ModelInferResponse(model_name="ensemble", id="r")
    if texts is not None:
        response.outputs.add(name="text_output", datatype="BYTES", shape=[1, len(texts)])
        response.raw_output_contents.append(
            b"".join(len(t).to_bytes(4, "little") + t for t in texts)
        )
    dtypes = {"INT32": np.int32, "INT64": np.int64, "UINT64": np.uint64}
    for name, (datatype, value) in (counters or {}).items():
        response.outputs.add(name=name, datatype=datatype, shape=[1, 1])
        response.raw_output_contents.append(np.array([[value]], dtype=dtypes[datatype]).tobytes())
    if final is not None:
        response.parameters["triton_final_response"].bool_param = final
    return response


def slow_path(result: InferResult) -> tuple[str, bool, dict[str, int]]:
    """What the gateway decoded before, through ``as_numpy``."""
    array = result.as_numpy("text_output")
    text = array.reshape(-1)[0].decode("utf-8", errors="replace") if array is not None else ""
    counters = {}
    for name in ("num_input_tokens", "num_output_tokens", "kv_cache_reused_blocks"):
        value = result.as_numpy(name)
        if value is not None and value.size:
            counters[name] = int(value.reshape(-1)[0])
    return text, array is not None, counters


@pytest.mark.parametrize(
    "texts",
    [[b" lorem"], [b""], ["naïve ☃ 🙂".encode()], [b"sing", b"apore"], [b"\xff\xfe broken"]],
)
def test_text_matches_as_numpy(texts: list[bytes]) -> None:
    result = InferResult(message(texts))
    decoded = text_response(result.get_response())
    assert (decoded.text, decoded.has_output, decoded.counters) == slow_path(result)


def test_counters_of_every_integer_width_match_as_numpy() -> None:
    counters = {
        "num_input_tokens": ("INT32", 7),
        "num_output_tokens": ("INT64", 2**40),
        "kv_cache_reused_blocks": ("UINT64", 3),
    }
    result = InferResult(message([b"x"], counters))
    decoded = text_response(result.get_response())
    assert decoded.counters == slow_path(result)[2]
    assert decoded.counters == {"num_input_tokens": 7, "num_output_tokens": 2**40,
                                "kv_cache_reused_blocks": 3}  # fmt: skip


def test_a_response_without_text_output_has_no_output() -> None:
    decoded = text_response(message(None, {"num_output_tokens": ("INT32", 4)}))
    assert decoded.text == "" and not decoded.has_output
    assert decoded.counters == {"num_output_tokens": 4}


@pytest.mark.parametrize("final", [None, False, True])
def test_final_flag(final: bool | None) -> None:
    assert text_response(message([b"x"], final=final)).final is bool(final)


def test_typed_contents_fall_back_to_as_numpy() -> None:
    response = service_pb2.ModelInferResponse(model_name="ensemble", id="r")
    text = response.outputs.add(name="text_output", datatype="BYTES", shape=[1])
    text.contents.bytes_contents.append(b"typed")
    decoded = text_response(response)
    assert decoded.text == "typed" and decoded.has_output
