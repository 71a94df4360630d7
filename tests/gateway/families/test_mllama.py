"""Llama-3.2-Vision: ``<|image|>`` per image, the Llama 3 chat template without a second BOS,
raw pixels, NVIDIA's end and pad ids, ``<|eot_id|>`` as a stop word."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.mllama import MAX_SIDE, Mllama, MllamaBase
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent

H = "<|start_header_id|>{}<|end_header_id|>\n\n"


def test_instruct_template_with_image_tokens_in_their_turn() -> None:
    """Golden value: Meta's Llama-3.2-11B-Vision-Instruct chat template (the one NVIDIA/TensorRT-LLM
    tensorrt_llm/runtime/processor_wrapper/mllama_processor_wrapper.py
    @16d2467ea8e3b45d7d9555010c2ad018d006d5c1 applies): with an image there is no system block
    at all."""
    chat = conversation(
        ("user", "Describe.", 1),
        ("assistant", "A harbour.", 0),
        ("user", "And now?", 0),
    )
    expected = (
        H.format("user")
        + "<|image|>Describe.<|eot_id|>"
        + H.format("assistant")
        + "A harbour.<|eot_id|>"
        + H.format("user")
        + "And now?<|eot_id|>"
        + H.format("assistant")
    )
    text = Mllama().render(chat)
    assert text == expected and not text.startswith("<|begin_of_text|>")


def test_text_only_system_block_has_the_templates_dates() -> None:
    """Golden value: Meta's Llama-3.2-11B-Vision-Instruct chat template (the one NVIDIA/TensorRT-LLM
    tensorrt_llm/runtime/processor_wrapper/mllama_processor_wrapper.py
    @16d2467ea8e3b45d7d9555010c2ad018d006d5c1 applies): without images, the system block opens with
    "Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n" (its default
    date_string), then the system text."""
    chat = conversation(("user", "Hi", 0), system="Be brief.")
    assert Mllama().render(chat) == (
        H.format("system")
        + "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
        + H.format("user")
        + "Hi<|eot_id|>"
        + H.format("assistant")
    )


def test_a_system_message_next_to_an_image_is_refused_as_the_template_refuses_it() -> None:
    """Meta's Llama-3.2-11B-Vision-Instruct chat template (the one NVIDIA/TensorRT-LLM
    tensorrt_llm/runtime/processor_wrapper/mllama_processor_wrapper.py
    @16d2467ea8e3b45d7d9555010c2ad018d006d5c1 applies) raises "Prompting with images is
    incompatible with system messages"."""
    chat = conversation(("user", "Describe.", 1), system="Be brief.")
    with pytest.raises(InvalidRequest, match="incompatible with system messages") as info:
        Mllama().check_conversation(chat)
    assert info.value.status_code == 400 and info.value.code == "unsupported_system_message"
    MllamaBase().check_conversation(chat)  # a base checkpoint has no template to break


def test_one_raw_image_per_request_as_nvidias_preprocessing_reads_them() -> None:
    """Golden limit: tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
    model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``VisionPreProcessor.mllama_process``
    pairs image i with query i: a second image of one request has no query (IndexError)."""
    with pytest.raises(TooManyMediaItems, match="at most 1 per request: NVIDIA") as info:
        Mllama().check_conversation(conversation(("user", "Compare.", 2)))
    assert info.value.status_code == 400 and "image_bytes_input" in info.value.message


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
