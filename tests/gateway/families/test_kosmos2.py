"""Kosmos-2: CLIP 224 pixels (checked with transformers' CLIPImageProcessor), a completion
prompt with NVIDIA's grounding default, one image."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import TooManyMediaItems
from gateway.families.kosmos2 import Kosmos2
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


def test_an_image_without_text_gets_the_grounding_prompt() -> None:
    assert Kosmos2().render(conversation(("user", "", 1))) == "<grounding>An image of"
    assert Kosmos2().render(conversation(("user", "<grounding>A photo of", 1))) == (
        "<grounding>A photo of"
    )


def test_history_is_preceding_text() -> None:
    chat = conversation(("user", "An image of", 1), ("assistant", "a dog", 0), ("user", "It is", 0))
    assert Kosmos2().render(chat) == "An image of a dog It is"


def test_one_image_only() -> None:
    with pytest.raises(TooManyMediaItems):
        Kosmos2().check_conversation(conversation(("user", "x", 2)))


def test_pixels_equal_the_hf_clip_processor() -> None:
    clip = pytest.importorskip("transformers.models.clip.image_processing_pil_clip")
    processor = clip.CLIPImageProcessorPil(
        size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}
    )
    image = sample_image(500, 300)
    expected = processor(image, return_tensors="np")["pixel_values"][0]
    # HF computes in float32; the family hands over those values in fp16, the wire type
    np.testing.assert_array_equal(Kosmos2().prepare_image(image), expected.astype(np.float16))


def test_wire_tensors() -> None:
    inputs = sent(
        generation("kosmos2", conversation(("user", "", 1)), [sample_image()]), ensemble()
    )
    assert inputs["image_input"][:2] == ("FP16", [1, 1, 3, 224, 224])
    assert inputs["text_input"][2] == ["<grounding>An image of"]
