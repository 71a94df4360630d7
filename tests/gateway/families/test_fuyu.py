"""Fuyu: the processor's own canvas, cut to whole 30 px patches (equal to transformers'
FuyuImageProcessor on that region), features from the patch grid, one image."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.families.fuyu import Fuyu, features_for, preprocess_fuyu
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


@pytest.mark.parametrize("size", [(640, 480), (3000, 1000), (100, 2000), (31, 29)])
def test_pixels_equal_the_hf_processor_on_the_patch_covered_region(size: tuple[int, int]) -> None:
    module = pytest.importorskip("transformers.models.fuyu.image_processing_pil_fuyu")
    image = sample_image(*size)
    hf = np.asarray(module.FuyuImageProcessorPil()(image, return_tensors="np")["images"][0][0])
    mine = preprocess_fuyu(image)
    height, width = mine.shape[1:]
    assert height % 30 == 0 and width % 30 == 0
    np.testing.assert_array_equal(mine, hf[:, :height, :width])
    assert features_for(size[1], size[0]) == height // 30 * (width // 30 + 1)


def test_largest_image_is_the_declared_feature_count() -> None:
    assert features_for(1080, 1920) == Fuyu.features_per_image == 36 * 65


def test_empty_question_goes_empty_and_wire_tensors() -> None:
    """Golden value: NVIDIA/TensorRT-LLM tensorrt_llm/runtime/multimodal_model_runner.py
    @033f406702a726877a9df9eb4931f0661cf0a39a, ``preprocess``: Fuyu's ids are the processor's
    ``input_ids`` for the text alone; the
    runner's ``pre_prompt = "Describe this image:"`` is never read for Fuyu. So an image with no
    question is sent with no invented text (the server's processor adds BOS and the answer
    marker around it)."""
    image = sample_image(640, 480)
    inputs = sent(generation("fuyu", conversation(("user", "", 1)), [image]), ensemble())
    assert inputs["text_input"][2] == [""]
    chat = conversation(("user", "", 1), system="Caption it.")
    assert Fuyu().render(chat) == "Caption it."
    assert inputs["image_input"][:2] == ("FP16", [1, 1, 3, 480, 660])
