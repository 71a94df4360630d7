"""VILA (contract only: transformers has no VILA): one ``<image>`` per image where the turn
carried it, SigLIP 384 pixels for several images, and the ensemble's tensors field by field."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.base import max_multimodal_len
from gateway.families.vila import SIGLIP_384, Vila
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


def splitting(max_images: int | None = 4) -> Vila:
    """A VILA family for a deployment whose ``max_num_images`` is ``max_images``."""
    return Vila().engine_images(max_images)


def test_served_models_sharing_the_family_keep_their_own_max_images() -> None:
    """``engine_images`` returns a configured copy (as ``bound`` does): two served models of
    one VILA family with different ``max_images`` do not reconfigure each other, and the
    family they started from is never changed."""
    shared = Vila()
    several, one = shared.engine_images(4), shared.engine_images(1)
    chat = conversation(("user", "Describe.", 1))
    assert several.render(chat) == "<image>\nDescribe." and several.image_limit() is None
    assert one.render(chat) == "Describe." and one.image_limit() == 1
    assert shared.render(chat) == "Describe." and not shared.splits_at_markers
    assert several.engine_images(4) is several and shared.engine_images(None) is shared


def test_one_image_marker_per_image_as_the_guide_sends() -> None:
    chat = conversation(("user", " Please elaborate what you see in the images?", 2))
    text = splitting().render(chat)
    assert text == "<image>\n<image>\n Please elaborate what you see in the images?"


@pytest.mark.parametrize("max_images", [None, 1])
def test_no_marker_where_the_preprocessing_does_not_split(max_images: int | None) -> None:
    """Golden rule: tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd, ``_create_request``: the text is split at
    ``<image>`` only ``if self.max_num_images and
    self.max_num_images > 1``; otherwise the one image's features go between the frame's head
    and the text, and a marker would reach the model as text. So no marker, one image."""
    family = splitting(max_images)
    assert family.render(conversation(("user", "Describe.", 1))) == "Describe."
    with pytest.raises(TooManyMediaItems, match="max_num_images") as info:
        family.check_conversation(conversation(("user", "Compare.", 2)))
    assert info.value.status_code == 400
    splitting(4).check_conversation(conversation(("user", "Compare.", 2)))


def test_markers_follow_their_turn_and_history_uses_vicuna_separators() -> None:
    chat = conversation(
        ("user", "What is this?", 1),
        ("assistant", "A cat.", 0),
        ("user", "And this?", 1),
        system="Be brief.",
    )
    # The server adds its system sentence + " USER: " before and " ASSISTANT:" after.
    assert splitting().render(chat) == (
        "Be brief.\n<image>\nWhat is this? ASSISTANT: A cat.</s>USER: <image>\nAnd this?"
    )


def test_user_text_may_not_forge_an_image_slot() -> None:
    with pytest.raises(InvalidRequest) as info:
        Vila().check_text(conversation(("user", "<image> hi", 0)))
    assert info.value.code == "reserved_marker"


def test_siglip_pixels_squash_to_384() -> None:
    siglip = pytest.importorskip("transformers.models.siglip.image_processing_pil_siglip")
    processor = siglip.SiglipImageProcessorPil(
        size={"height": 384, "width": 384}, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    image = sample_image(500, 300)
    expected = processor(image, return_tensors="np")["pixel_values"][0]
    np.testing.assert_array_equal(Vila().prepare_image(image), expected.astype(np.float16))
    assert SIGLIP_384.size == (384, 384)


def test_wire_tensors_field_by_field() -> None:
    images = [sample_image(640, 480, seed=1), sample_image(300, 500, seed=2)]
    chat = conversation(("user", "Compare.", 2))
    inputs = sent(generation("vila", chat, images, extra_id=77, max_images=4), ensemble())
    assert set(inputs) == {
        "text_input",
        "max_tokens",
        "stream",
        "random_seed",
        "end_id",
        "pad_id",
        "top_k",
        "top_p",
        "temperature",
        "beam_width",
        "prompt_table_extra_id",
        "image_input",
    } - {"end_id", "pad_id"}  # a sampled request without a seed gets a fresh one
    assert inputs["text_input"] == ("BYTES", [1, 1], ["<image>\n<image>\nCompare."])
    assert inputs["max_tokens"][:2] == ("INT32", [1, 1])
    assert inputs["prompt_table_extra_id"] == ("UINT64", [1, 1], np.array([[77]], np.uint64))
    assert inputs["stream"][2].tolist() == [[True]]
    dtype, shape, pixels = inputs["image_input"]
    assert (dtype, shape) == ("FP16", [1, 2, 3, 384, 384])
    for index, image in enumerate(images):
        expected = Vila().prepare_image(image).astype(np.float16)
        np.testing.assert_array_equal(pixels[0, index], expected)


def test_engine_size_for_four_images_as_the_guide_builds_it() -> None:
    assert max_multimodal_len(8, Vila.features_per_image, 4) == 6272
