import numpy as np
import pytest

from gateway.errors import InvalidRequest
from gateway.triton.contract import parse_model_config
from gateway.triton.tensors import GenerationRequest, build_inputs


def contract(*extra: tuple[str, str, list[int]]):
    names = [
        ("text_input", "TYPE_STRING", [1]),
        ("max_tokens", "TYPE_INT32", [1]),
        ("temperature", "TYPE_FP32", [1]),
        ("random_seed", "TYPE_UINT64", [1]),
        ("stop_words", "TYPE_STRING", [-1]),
        ("stream", "TYPE_BOOL", [1]),
        ("prompt_table_extra_id", "TYPE_UINT64", [1]),
        *extra,
    ]
    return parse_model_config(
        {
            "name": "m",
            "max_batch_size": 4,
            "input": [{"name": n, "data_type": t, "dims": d} for n, t, d in names],
        }
    )


def by_name(inputs) -> dict:
    return {i.name(): i for i in inputs}


def test_only_declared_inputs_are_sent_with_batch_dimension() -> None:
    request = GenerationRequest(
        text_input="hi",
        max_tokens=5,
        temperature=0.5,
        top_p=0.9,  # not declared: left out
        seed=42,
        stop_words=("\n", "END"),
        prompt_table_extra_id=2**63 + 5,
    )
    inputs = by_name(build_inputs(request, contract()))
    assert set(inputs) == {
        "text_input",
        "max_tokens",
        "temperature",
        "random_seed",
        "stop_words",
        "stream",
        "prompt_table_extra_id",
    }
    assert inputs["max_tokens"].shape() == [1, 1]
    assert inputs["max_tokens"].datatype() == "INT32"
    assert inputs["random_seed"].datatype() == "UINT64"
    assert inputs["stop_words"].shape() == [1, 2]
    assert inputs["text_input"].datatype() == "BYTES"
    assert inputs["prompt_table_extra_id"].datatype() == "UINT64"


def test_image_tensor_uses_declared_dtype_and_rank() -> None:
    images = np.zeros((1, 2, 3, 336, 336), dtype=np.float16)
    request = GenerationRequest(text_input="x", max_tokens=1, images=("image_input", images))
    inputs = by_name(
        build_inputs(request, contract(("image_input", "TYPE_FP16", [-1, -1, -1, -1])))
    )
    assert inputs["image_input"].shape() == [1, 2, 3, 336, 336]
    assert inputs["image_input"].datatype() == "FP16"


def test_image_for_model_without_image_input_is_a_client_error() -> None:
    request = GenerationRequest(
        text_input="x",
        max_tokens=1,
        images=("image_bytes_input", np.zeros((1, 1, 4, 4, 3), np.uint8)),
    )
    with pytest.raises(InvalidRequest, match="cannot take images"):
        build_inputs(request, contract())
