"""Qwen2-VL: every image 504 x 504 raw pixels (324 features, checked with transformers'
Qwen2VLImageProcessor), ChatML history inside the question, and no KV-reuse id."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from gateway.errors import TooManyMediaItems
from gateway.families.qwen2_vl import SIDE, Qwen2VL
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


@pytest.mark.parametrize("size", [(640, 480), (100, 900), (504, 504)])
def test_every_image_costs_324_features_in_the_hf_processor(size: tuple[int, int]) -> None:
    module = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    processor = module.Qwen2VLImageProcessorPil()
    prepared = Qwen2VL().prepare_image(sample_image(*size))
    assert prepared.shape == (SIDE, SIDE, 3) and prepared.dtype == np.uint8
    out = processor(Image.fromarray(prepared), return_tensors="np")
    t, h, w = out["image_grid_thw"][0]
    assert t * h * w // 4 == Qwen2VL.features_per_image == 324


def test_resized_as_nvidias_runner_does() -> None:
    image = sample_image(640, 480)
    expected = np.asarray(image.resize((504, 504), resample=Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(Qwen2VL().prepare_image(image), expected)


def test_history_rides_inside_the_question_in_chatml() -> None:
    chat = conversation(
        ("user", "What is it?", 1), ("assistant", "A dog.", 0), ("user", "Colour?", 0)
    )
    assert Qwen2VL().render(chat) == (
        "What is it?<|im_end|>\n<|im_start|>assistant\nA dog.<|im_end|>\n<|im_start|>user\nColour?"
    )


def test_one_raw_image_per_request_as_nvidias_preprocessing_reads_them() -> None:
    """Golden limit: tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
    model.py @c2e65b88d85255be30cf50440a91662abeb497dd,
    ``VisionPreProcessor.qwen2_vl_process_image``
    pairs image i with query i: a second image of one request indexes a query that is not there
    (IndexError)."""
    with pytest.raises(TooManyMediaItems, match="at most 1 per request: NVIDIA") as info:
        Qwen2VL().check_conversation(conversation(("user", "Compare.", 2)))
    assert info.value.status_code == 400 and "image_bytes_input" in info.value.message


def test_wire_tensors_without_the_extra_id() -> None:
    images = [sample_image(640, 480, seed=1)]
    inputs = sent(generation("qwen2_vl", conversation(("user", "q", 1)), images), ensemble())
    assert inputs["image_bytes_input"][:2] == ("UINT8", [1, 1, 504, 504, 3])
    assert "prompt_table_extra_id" not in inputs
    assert inputs["end_id"][2].item() == 151645


def test_detail_changes_nothing_at_its_one_resolution() -> None:
    """Qwen2-VL is sent at 504 x 504 whatever the image (324 features, as max_multimodal_len is
    sized): every detail is the same pixels, the same content id and the same token count."""
    from PIL import Image

    from gateway.families.qwen2_vl import Qwen2VL

    family = Qwen2VL()
    image = Image.new("RGB", (1600, 1200))
    for detail in ("low", "high", "auto", "original"):
        assert family.image_for_detail(image, detail) is image
        assert family.detail_key(detail) == ""
    assert family.image_tokens([(1200, 1600)]) == family.image_tokens([(10, 10)]) == 324
