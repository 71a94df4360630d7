"""The family reference models served by the real tritonserver, one parametrised suite.

Each model must load with the contract its TensorRT-LLM deployment has (image tensor name and
dtype, the extra inputs it needs, ``prompt_table_extra_id`` only where the family has KV
reuse), stream per-token deltas that join to the unstreamed text, answer as the same model run
in-process from the same tiny checkpoint (so the image tensor was read as sent), and turn a
malformed image into an error response instead of a hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2_grpc

from server_repo.reference_kit import ReferenceEngine
from tests.server_repo.family_samples import ENCODER_DECODER, FAMILIES, PROMPTS, family_media
from tests.server_repo.reference.triton_stream import int_output, one, stream, tensors, texts

IMAGE_BYTES = ("mllama", "qwen2_vl")
NO_EXTRA_ID = ("qwen2_vl", *ENCODER_DECODER)


async def test_family_models_load_with_their_contract(
    client: grpcclient.InferenceServerClient,
) -> None:
    for family in FAMILIES:
        model = f"reference_{family}"
        assert await client.is_model_ready(model), model
        config = (await client.get_model_config(model, as_json=True))["config"]
        declared = {item["name"]: item for item in config["input"]}
        image = "image_bytes_input" if family in IMAGE_BYTES else "image_input"
        dtype = "TYPE_UINT8" if family in IMAGE_BYTES else "TYPE_FP16"
        assert declared[image]["data_type"] == dtype, model
        assert {"text_input", "max_tokens", "stream", "min_tokens", "seed"} <= set(declared)
        assert ("prompt_table_extra_id" in declared) == (family not in NO_EXTRA_ID), model
        assert ("decoder_text_input" in declared) == (family in ENCODER_DECODER), model
        assert ("image_sizes_input" in declared) == (family == "llava_next"), model
        assert config["model_transaction_policy"]["decoupled"] is True
        assert {"return_log_probs", "return_generation_logits"} <= set(declared)
        outputs = {item["name"]: (item["data_type"], item["dims"]) for item in config["output"]}
        assert outputs["cum_log_probs"] == ("TYPE_FP32", ["-1"]), model
        assert outputs["output_log_probs"] == ("TYPE_FP32", ["-1", "-1"]), model
        assert outputs["generation_logits"] == ("TYPE_FP32", ["-1", "-1", "-1"]), model


@pytest.mark.parametrize("family", FAMILIES)
async def test_streams_deltas_that_join_to_the_text_the_kit_gives(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    family_engine: Callable[[str], ReferenceEngine],
    family: str,
) -> None:
    media = family_media(family, 0)
    request = tensors(
        PROMPTS[family], 8, **media.tensors(), return_num_input_tokens=one(True, np.bool_)
    )
    model = f"reference_{family}"
    streamed, error = await stream(stub, model, {**request, "stream": one(True, np.bool_)})
    assert error is None
    whole, error = await stream(stub, model, request)
    assert error is None and len(whole) == 2
    local = await asyncio.to_thread(family_engine(family).complete, media.request(family))
    assert len(local.token_ids) > 1 and local.text
    assert "".join(texts(streamed)) == texts(whole)[0] == local.text
    assert int_output(whole[0], "num_input_tokens") == local.stats.input_tokens
    assert streamed[-1].as_numpy("text_output") is None  # the empty final response


def _bad_media(family: str) -> tuple[dict[str, np.ndarray], str]:
    """An image tensor the family's model must refuse, and a word of the error it gives."""
    if family in IMAGE_BYTES:
        return {"image_bytes_input": np.zeros((1, 1, 8, 8, 4), np.uint8)}, "RGB"
    if family == "llava_next":
        return {"image_input": np.zeros((1, 3, 3, 336, 336), np.float16)}, "image_sizes_input"
    if family == "deplot":
        return {"image_input": np.zeros((1, 1, 16, 700), np.float16)}, "770"
    if family == "fuyu":
        return {"image_input": np.zeros((1, 1, 3, 1200, 30), np.float16)}, "1080"
    return {"image_input": np.zeros((1, 1, 3, 100, 100), np.float16)}, "image_input must be"


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_malformed_image_gets_an_error_not_a_hang(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, family: str
) -> None:
    media, message = _bad_media(family)
    results, error = await stream(
        stub, f"reference_{family}", tensors("q", 4, **media), timeout_s=30
    )
    assert results == [] and error is not None and message in error
