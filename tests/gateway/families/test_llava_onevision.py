import json

import numpy as np
import pytest
from PIL import Image

from gateway.errors import TooManyMediaItems, UpstreamUnavailable
from gateway.families.base import Conversation, Turn
from gateway.families.llava_onevision import (
    CHECKPOINT_PINPOINTS,
    MAX_SIDE,
    LlavaOnevision,
    anyres_features,
    stack_letterboxed,
)
from tests.gateway.families.contracts import conversation


def test_multi_turn_uses_chatml_between_the_server_added_headers() -> None:
    conversation = Conversation(
        system="Be brief.",
        turns=(Turn("user", "Hi", 1), Turn("assistant", "Hello."), Turn("user", "More?")),
    )
    text = LlavaOnevision().render(conversation)
    assert text == (
        "Be brief.\n\nHi<|im_end|><|im_start|>assistant\nHello.<|im_end|><|im_start|>user\nMore?"
    )


def test_raw_pixels_keep_size_and_stack_as_uint8() -> None:
    family = LlavaOnevision()
    arrays = [family.prepare_image(Image.new("RGB", (50, 40), (1, 2, 3)))] * 2
    tensor = family.stack_images(arrays)
    assert tensor.shape == (1, 2, 40, 50, 3)
    assert tensor.dtype == np.uint8
    assert (tensor[0, 0, 0, 0] == [1, 2, 3]).all()


def test_huge_images_are_downscaled_to_the_largest_anyres_canvas() -> None:
    array = LlavaOnevision().prepare_image(Image.new("RGB", (5000, 2500)))
    assert max(array.shape[:2]) == MAX_SIDE
    assert array.shape[0] * 2 == array.shape[1]


def test_different_sizes_share_a_letterboxed_canvas() -> None:
    small = np.full((2, 2, 3), 9, np.uint8)
    large = np.full((4, 6, 3), 7, np.uint8)
    stacked = stack_letterboxed([small, large])
    assert stacked.shape == (2, 4, 6, 3)
    assert (stacked[0, 1:3, 2:4] == 9).all() and stacked[0, 0, 0, 0] == 0
    assert (stacked[1] == 7).all()


def test_one_raw_image_per_request_as_nvidias_preprocessing_reads_them() -> None:
    """Golden limit: tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
    model.py @c2e65b88d85255be30cf50440a91662abeb497dd,
    ``VisionPreProcessor.llava_onevision_process_image``
    pairs image i with query i: a second image of one request fails its "same batch size as
    Query" assert."""
    with pytest.raises(TooManyMediaItems, match="at most 1 per request: NVIDIA") as info:
        LlavaOnevision().check_conversation(conversation(("user", "Compare.", 2)))
    assert info.value.status_code == 400 and "image_bytes_input" in info.value.message


# The reference model's own count (HF LLaVA-OneVision's processor arithmetic, checked there
# against the features the model produces): the gateway's must agree for every shape.
@pytest.mark.parametrize(
    ("height", "width"),
    [(40, 50), (384, 384), (300, 1000), (1000, 300), (768, 768), (800, 1000), (2304, 1152)],
)
def test_image_tokens_are_the_processors_count(height: int, width: int) -> None:
    from server_repo.reference_kit.archs.llava_onevision import TINY_PINPOINTS, image_feature_count

    family = LlavaOnevision()
    family.check_deployment({"image_grid_pinpoints": json.dumps(TINY_PINPOINTS)}, "m")
    assert family.image_tokens([(height, width)]) == image_feature_count(height, width)
    checkpoint = [[h, w] for h, w in CHECKPOINT_PINPOINTS]
    expected = image_feature_count(height, width, pinpoints=checkpoint)
    assert anyres_features(height, width) == expected


def test_several_images_count_the_base_view_and_a_newline_each() -> None:
    assert LlavaOnevision().image_tokens([(500, 500), (100, 900)]) == 2 * (729 + 1)


def test_video_tokens_are_pooled_frames_and_a_newline() -> None:
    from server_repo.reference_kit.archs.llava_onevision import video_feature_count

    assert LlavaOnevision().video_tokens(8) == video_feature_count(8) == 8 * 196 + 1


def test_detail_low_fits_one_tile_and_costs_fewer_tokens() -> None:
    family = LlavaOnevision()
    image = Image.new("RGB", (1000, 800))
    low = family.image_for_detail(image, "low")
    assert low.size == (384, 307)
    for detail in ("high", "auto", "original", None):
        assert family.image_for_detail(image, detail) is image
    assert family.detail_key("low") == "low" and family.detail_key("high") == ""
    low_tokens = family.image_tokens([(low.height, low.width)])
    high_tokens = family.image_tokens([(800, 1000)])
    assert low_tokens is not None and high_tokens is not None and low_tokens < high_tokens


def test_a_malformed_pinpoints_parameter_is_a_deployment_error() -> None:
    with pytest.raises(UpstreamUnavailable, match="image_grid_pinpoints"):
        LlavaOnevision().check_deployment({"image_grid_pinpoints": "[[384]]"}, "m")


def test_image_tokens_count_the_pixels_sent_after_the_largest_canvas_fit() -> None:
    family = LlavaOnevision()
    sent = family.prepare_image(Image.new("RGB", (5000, 2500)))
    assert family.image_tokens([(2500, 5000)]) == anyres_features(*sent.shape[:2])
