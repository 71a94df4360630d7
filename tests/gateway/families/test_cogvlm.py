"""CogVLM (contract only: transformers has no CogVLM): the runner's [INST] prompt, 490 px CLIP
pixels, one required image, and the ensemble's tensors field by field, in BF16 when the
deployment declares it (CogVLM runs in bf16 only)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from PIL import Image

from gateway.errors import InvalidRequest, UpstreamUnavailable
from gateway.families._pixels import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from gateway.families.base import max_multimodal_len
from gateway.families.cogvlm import POSITION_IDS_PARAMETER, CogVLM
from gateway.triton.contract import parse_model_config
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


def test_runner_prompt_and_history() -> None:
    assert CogVLM().render(conversation(("user", "please describe this image", 1))) == (
        " [INST] please describe this image [/INST] "
    )
    chat = conversation(("user", "What?", 1), ("assistant", "A cat.", 0), ("user", "Colour?", 0))
    assert CogVLM().render(chat) == " [INST] What? [/INST] A cat. [INST] Colour? [/INST] "


def test_text_only_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="needs an image"):
        CogVLM().check_conversation(conversation(("user", "hi", 0)))


def test_pixels_are_the_490_square_clip_transform() -> None:
    image = sample_image(640, 480)
    resized = np.asarray(image.resize((490, 490), Image.Resampling.BICUBIC)).astype(np.float64)
    expected = ((resized / 255).astype(np.float32) - np.float32(OPENAI_CLIP_MEAN)) / np.float32(
        OPENAI_CLIP_STD
    )
    np.testing.assert_allclose(
        CogVLM().prepare_image(image), expected.transpose(2, 0, 1).astype(np.float16)
    )


def test_wire_tensors_field_by_field_in_bf16() -> None:
    image = sample_image(640, 480)
    chat = conversation(("user", "please describe this image", 1))
    request = generation("cogvlm", chat, [image], extra_id=5)
    inputs = sent(request, ensemble(replace={"image_input": "TYPE_BF16"}))
    assert inputs["text_input"] == (
        "BYTES",
        [1, 1],
        [" [INST] please describe this image [/INST] "],
    )
    assert inputs["max_tokens"] == ("INT32", [1, 1], np.array([[64]], np.int32))
    assert "prompt_table_extra_id" not in inputs  # built with --paged_kv_cache disable
    assert "end_id" not in inputs and "pad_id" not in inputs  # the tokenizer's, server side
    dtype, shape, raw = inputs["image_input"]
    assert (dtype, shape) == ("BF16", [1, 1, 3, 490, 490])
    expected = CogVLM().prepare_image(image).astype(np.float16).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(raw[0, 0], expected.view(np.uint16))


def test_engine_size_as_the_guide_builds_it() -> None:
    assert max_multimodal_len(48, CogVLM.features_per_image, 1) == 61440


def test_a_deployment_that_cannot_pass_position_ids_is_refused_saying_why() -> None:
    """NVIDIA's runner feeds CogVLM custom position ids (NVIDIA/TensorRT-LLM
    tensorrt_llm/runtime/multimodal_model_runner.py @033f406702a726877a9df9eb4931f0661cf0a39a,
    ``prepare_position_ids_for_cogvlm``: [0, 1, 2 x 1225, 3, 4, ...]); TensorRT-LLM's Triton
    backend builds every request with ``positionIds`` empty (tensorrtllm_backend
    inflight_batcher_llm/src/utils.cc @c2e65b88d85255be30cf50440a91662abeb497dd) and its
    ``tensorrt_llm`` model has no input for them. So only a deployment that says it computes
    them itself (``cogvlm_position_ids: server``) is served."""
    with pytest.raises(UpstreamUnavailable, match="position ids") as info:
        CogVLM().check_deployment({}, "ensemble")
    assert info.value.code == "unsupported_deployment"
    assert POSITION_IDS_PARAMETER in info.value.message and "utils.cc" in info.value.message
    with pytest.raises(UpstreamUnavailable):
        CogVLM().check_deployment({POSITION_IDS_PARAMETER: "engine"}, "ensemble")
    CogVLM().check_deployment({POSITION_IDS_PARAMETER: "server"}, "ensemble")


def test_the_parameter_is_read_from_the_deployments_config() -> None:
    """The contract read at start-up carries the config's parameters to the family."""
    config = {
        "name": "ensemble",
        "input": [
            {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
            {"name": "max_tokens", "data_type": "TYPE_INT32", "dims": [1]},
        ],
    }
    assert parse_model_config(config).parameters == {}
    config["parameters"] = {POSITION_IDS_PARAMETER: {"string_value": "server"}}
    parameters = parse_model_config(config).parameters
    CogVLM().check_deployment(parameters, "ensemble")
