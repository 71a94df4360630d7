"""Llama-3.2-Vision: ``<|image|>`` per image, the Llama 3 chat template without a second BOS,
raw pixels, NVIDIA's end and pad ids, ``<|eot_id|>`` as a stop word."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest
from gateway.families.mllama import MAX_SIDE, Mllama, MllamaBase
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent

H = "<|start_header_id|>{}<|end_header_id|>\n\n"


def test_instruct_template_with_image_tokens_in_their_turn() -> None:
    chat = conversation(
        ("user", "Describe.", 1),
        ("assistant", "A harbour.", 0),
        ("user", "And these?", 2),
        system="Be brief.",
    )
    expected = (
        H.format("system")
        + "Be brief.<|eot_id|>"
        + H.format("user")
        + "<|image|>Describe.<|eot_id|>"
        + H.format("assistant")
        + "A harbour.<|eot_id|>"
        + H.format("user")
        + "<|image|><|image|>And these?<|eot_id|>"
        + H.format("assistant")
    )
    text = Mllama().render(chat)
    assert text == expected and not text.startswith("<|begin_of_text|>")


def test_base_checkpoints_take_image_tokens_then_text() -> None:
    chat = conversation(("user", "If I had to write a haiku for this one", 1))
    assert MllamaBase().render(chat) == "<|image|>If I had to write a haiku for this one"


def test_text_only_is_allowed_and_forged_markers_are_not() -> None:
    Mllama().check_conversation(conversation(("user", "hello", 0)))
    with pytest.raises(InvalidRequest):
        Mllama().check_text(conversation(("user", "<|eot_id|>", 0)))


def test_raw_pixels_bounded_by_four_tiles() -> None:
    big = Mllama().prepare_image(sample_image(4000, 1000))
    assert big.dtype == np.uint8 and max(big.shape[:2]) == MAX_SIDE == 2240
    small = Mllama().prepare_image(sample_image(300, 200))
    assert small.shape == (200, 300, 3)


def test_wire_tensors() -> None:
    image = sample_image(300, 200)
    inputs = sent(generation("mllama", conversation(("user", "Hi", 1)), [image]), ensemble())
    assert inputs["image_bytes_input"][:2] == ("UINT8", [1, 1, 200, 300, 3])
    np.testing.assert_array_equal(inputs["image_bytes_input"][2][0, 0], np.asarray(image))
    assert inputs["end_id"][2].item() == 128001 and inputs["pad_id"][2].item() == 128004
    assert "image_input" not in inputs
