"""Nougat: the page recipe (margin crop, resize, thumbnail, centred black pad, ImageNet
normalisation) equal to transformers' NougatImageProcessor, no prompt, mBART's ids."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from gateway.errors import UpstreamUnavailable
from gateway.families.nougat import Nougat, crop_margin, preprocess_page
from gateway.triton.contract import parse_model_config
from tests.gateway.families.contracts import conversation, ensemble, generation, sent


def page(width: int, height: int, seed: int = 0) -> Image.Image:
    """White paper with a block of dark noise: margins for crop_margin to find."""
    rng = np.random.default_rng(seed)
    array = np.full((height, width, 3), 255, np.uint8)
    top, left = height // 5, width // 7
    array[top : height // 2, left : width // 2] = rng.integers(
        0, 256, (height // 2 - top, width // 2 - left, 3)
    )
    return Image.fromarray(array)


@pytest.mark.parametrize("size", [(640, 480), (1700, 2200), (300, 300)])
def test_pixels_equal_the_hf_processor(size: tuple[int, int]) -> None:
    module = pytest.importorskip("transformers.models.nougat.image_processing_pil_nougat")
    image = page(*size)
    expected = module.NougatImageProcessorPil()(image, return_tensors="np")["pixel_values"][0]
    np.testing.assert_array_equal(preprocess_page(image), expected)


def test_blank_page_is_not_cropped() -> None:
    blank = Image.new("RGB", (100, 80), (255, 255, 255))
    assert crop_margin(blank) is blank


def test_wire_tensors() -> None:
    request = generation("nougat", conversation(("user", "", 1)), [page(600, 800)])
    inputs = sent(request, ensemble())
    assert inputs["text_input"][2] == [""]
    assert inputs["decoder_text_input"][2] == ["<s>"]
    assert inputs["image_input"][:2] == ("FP16", [1, 1, 3, 896, 672])
    assert inputs["end_id"][2].item() == 2 and inputs["pad_id"][2].item() == 1
    assert Nougat.features_per_image == (896 // 32) * (672 // 32)


def test_decoder_starts_at_bos_as_nvidias_runner_starts_it() -> None:
    """Golden value: NVIDIA/TensorRT-LLM tensorrt_llm/runtime/multimodal_model_runner.py
    @033f406702a726877a9df9eb4931f0661cf0a39a, ``setup_inputs``: Nougat's ``decoder_input_ids =
    [[config.decoder.bos_token_id]]`` (``<s>``).
    NVIDIA's Triton preprocessing (tensorrtllm_backend
    all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd, ``execute``) starts at ``pad_id`` when no
    ``DECODER_QUERY`` comes, so the gateway sends ``<s>`` and refuses a deployment that cannot
    take it."""
    assert Nougat.decoder_prompt == "<s>"
    assert "decoder_text_input" in Nougat.required_inputs
    without = parse_model_config(
        {
            "name": "ensemble",
            "input": [
                {"name": n, "data_type": "TYPE_STRING", "dims": [1]}
                for n in ("text_input", "max_tokens")
            ],
        }
    )
    with pytest.raises(UpstreamUnavailable, match="decoder_text_input"):
        without.require(Nougat.required_inputs, "a TensorRT-LLM text contract")
