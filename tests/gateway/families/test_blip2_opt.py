"""BLIP2-OPT: the Question/Answer prompt, one required image, 224 px pixels equal to
transformers' BlipImageProcessor (PIL backend), OPT's end and pad ids."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.base import max_multimodal_len
from gateway.families.blip2_opt import BLIP2_224, Blip2Opt
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


def test_prompt_is_question_answer_with_history_and_system() -> None:
    chat = conversation(
        ("user", "which city is this?", 1),
        ("assistant", "singapore", 0),
        ("user", "why?", 0),
        system="Answer briefly.",
    )
    assert Blip2Opt().render(chat) == (
        "Answer briefly. Question: which city is this? Answer: singapore Question: why? Answer:"
    )


def test_text_only_and_two_images_are_refused_before_any_fetch() -> None:
    with pytest.raises(InvalidRequest, match="needs an image") as info:
        Blip2Opt().check_conversation(conversation(("user", "hi", 0)))
    assert info.value.code == "image_required" and info.value.status_code == 400
    with pytest.raises(TooManyMediaItems, match="at most 1"):
        Blip2Opt().check_conversation(conversation(("user", "compare", 2)))


@pytest.mark.parametrize("size", [(640, 480), (100, 300), (224, 224)])
def test_pixels_equal_the_hf_blip_processor(size: tuple[int, int]) -> None:
    blip = pytest.importorskip("transformers.models.blip.image_processing_pil_blip")
    processor = blip.BlipImageProcessorPil(size={"height": 224, "width": 224})
    image = sample_image(*size)
    expected = processor(image, return_tensors="np")["pixel_values"][0]
    # HF computes in float32; the family hands over those values in fp16, the wire type
    np.testing.assert_array_equal(Blip2Opt().prepare_image(image), expected.astype(np.float16))
    assert BLIP2_224.size == (224, 224)


def test_wire_tensors() -> None:
    image = sample_image()
    chat = conversation(("user", "which city is this?", 1))
    inputs = sent(generation("blip2_opt", chat, [image]), ensemble())
    assert inputs["text_input"][2] == ["Question: which city is this? Answer:"]
    dtype, shape, pixels = inputs["image_input"]
    assert (dtype, shape) == ("FP16", [1, 1, 3, 224, 224])
    np.testing.assert_array_equal(pixels[0, 0], Blip2Opt().prepare_image(image).astype(np.float16))
    assert inputs["end_id"][2].item() == 50118 and inputs["pad_id"][2].item() == 1
    assert inputs["prompt_table_extra_id"][2].item() == 12345


def test_engine_size_as_the_guide_builds_it() -> None:
    assert max_multimodal_len(8, Blip2Opt.features_per_image, 1) == 256  # --max_multimodal_len 256


def test_answers_end_at_the_newline_as_nvidias_runner_ends_them() -> None:
    """Golden value: NVIDIA/TensorRT-LLM tensorrt_llm/runtime/multimodal_model_runner.py
    @033f406702a726877a9df9eb4931f0661cf0a39a, ``generate``: for BLIP2-OPT
    ``end_id = tokenizer.encode("\\n", add_special_tokens=False)[0]`` ("model outputs a \\n at
    the end"); in OPT's vocabulary (GPT-2 byte-level BPE, fairseq ids) that is 50118, not
    ``</s>`` (2), the tokenizer EOS NVIDIA's Triton preprocessing would use."""
    assert Blip2Opt.default_end_id == 50118
    request = generation(
        "blip2_opt", conversation(("user", "which city is this?", 1)), [sample_image()]
    )
    assert request.end_id == 50118
