import numpy as np
import pytest
from PIL import Image

from gateway.errors import TooManyMediaItems
from gateway.families.base import Conversation, Turn
from gateway.families.llava_onevision import MAX_SIDE, LlavaOnevision, stack_letterboxed
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
