import pytest

from gateway.errors import UpstreamUnavailable
from gateway.triton.contract import parse_model_config


def config(*names: tuple[str, str, list[int]], decoupled: bool = True) -> dict:
    return {
        "name": "ensemble",
        "max_batch_size": 8,
        "input": [{"name": n, "data_type": t, "dims": d, "optional": True} for n, t, d in names],
        "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": ["-1"]}],
        "model_transaction_policy": {"decoupled": decoupled},
        "parameters": {"tokens_per_block": {"string_value": "32"}},
    }


BASE = (("text_input", "TYPE_STRING", [1]), ("max_tokens", "TYPE_INT32", [1]))


def test_old_and_new_seed_names_resolve_to_the_declared_spelling() -> None:
    old = parse_model_config(
        config(*BASE, ("random_seed", "TYPE_UINT64", [1]), ("min_length", "TYPE_INT32", [1]))
    )
    new = parse_model_config(
        config(*BASE, ("seed", "TYPE_UINT64", [1]), ("min_tokens", "TYPE_INT32", [1]))
    )
    assert old.input_name("seed") == "random_seed"
    assert old.input_name("min_tokens") == "min_length"
    assert new.input_name("seed") == "seed"
    assert new.input_name("min_tokens") == "min_tokens"
    assert old.input_name("prompt_table_extra_id") is None


def test_dtypes_dims_policy_and_parameters() -> None:
    contract = parse_model_config(
        config(*BASE, ("image_input", "TYPE_FP16", ["-1", "-1", "-1", "-1"]))
    )
    assert contract.inputs["image_input"].datatype == "FP16"
    assert contract.inputs["image_input"].dims == (-1, -1, -1, -1)
    assert contract.inputs["text_input"].datatype == "BYTES"
    assert contract.decoupled
    assert contract.max_batch_size == 8
    assert contract.int_parameter("tokens_per_block") == 32
    assert contract.int_parameter("missing") is None


def test_model_without_text_contract_is_refused() -> None:
    with pytest.raises(UpstreamUnavailable, match="text_input"):
        parse_model_config(config(("max_tokens", "TYPE_INT32", [1]))).require(
            ("text_input", "max_tokens"), "a TensorRT-LLM text contract"
        )
