"""NVIDIA's llmapi contract in the Triton room: recognised from the config, its inputs built as
declared, its responses read as NVIDIA's model.py writes them."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest
from gateway.families.calls import LlmapiRequest, Sampling
from gateway.triton.contract import parse_model_config
from gateway.triton.llmapi import llmapi_inputs, llmapi_response
from tests.fakes.triton_configs import ensemble_config, llmapi_config, whisper_direct_config
from tests.fakes.triton_wire import infer_response


def test_the_contract_is_recognised_from_the_inputs() -> None:
    assert parse_model_config(llmapi_config("m")).kind == "llmapi"
    assert parse_model_config(ensemble_config("e")).kind == "engine"
    assert parse_model_config(whisper_direct_config("w")).kind == "engine"


def test_inputs_have_no_batch_axis_and_the_declared_dtypes() -> None:
    contract = parse_model_config(llmapi_config("m"))
    call = LlmapiRequest(
        "prompt", 7, 3, stream=True, sampling=Sampling(0.5, 0.9, 4, 2**64 - 1),
        stop=("a", "b"), image_urls=("data:image/png;base64,AA", "data:image/png;base64,BB"),
    )  # fmt: skip
    tensors = {t.name(): t for t in llmapi_inputs(call, contract, "m")}
    shapes = {name: (t.datatype(), t.shape()) for name, t in tensors.items()}
    assert shapes == {
        "text_input": ("BYTES", [1]),
        "image_url": ("BYTES", [2]),
        "streaming": ("BOOL", [1]),
        "sampling_param_max_tokens": ("INT32", [1]),
        "sampling_param_temperature": ("FP32", [1]),
        "sampling_param_top_p": ("FP32", [1]),
        "sampling_param_top_k": ("INT32", [1]),
        "sampling_param_seed": ("UINT64", [1]),
        "sampling_param_stop": ("BYTES", [2]),
        "sampling_param_exclude_input_from_output": ("BOOL", [1]),
        "sampling_param_return_perf_metrics": ("BOOL", [1]),
        "return_finish_reason": ("BOOL", [1]),
        "return_stop_reason": ("BOOL", [1]),
    }


def test_a_field_whose_input_is_not_declared_is_refused_by_name() -> None:
    contract = parse_model_config(llmapi_config("m", without=("sampling_param_top_k",)))
    call = LlmapiRequest("p", 7, 1, sampling=Sampling(top_k=3))
    with pytest.raises(InvalidRequest) as refused:
        llmapi_inputs(call, contract, "served-id")
    assert refused.value.param == "top_k"
    assert "'sampling_param_top_k'" in refused.value.message


def test_responses_are_read_as_nvidias_model_writes_them() -> None:
    # model.py writes the KV-cache counters in text_output's dtype (BYTES) and str(None)
    # for a finish reason not reached yet.
    raw = infer_response(
        model="m",
        request_id="r",
        text_output=np.array([b"so far"], np.object_),
        finish_reason=np.array([b"None"], np.object_),
        kv_cache_reused_block=np.array([b"3"], np.object_),
    )
    response = llmapi_response(raw)
    assert (response.text, response.finish_reason, response.reused_blocks) == ("so far", None, 3)
    last = infer_response(
        model="m",
        request_id="r",
        final=True,
        text_output=np.array([b"all"], np.object_),
        finish_reason=np.array([b"length"], np.object_),
        kv_cache_reused_block=np.array([2], np.int32),
    )
    response = llmapi_response(last)
    assert (response.final, response.finish_reason, response.reused_blocks) == (True, "length", 2)
