"""InternLM-XComposer2 (contract only: remote code): the whole InternLM2 chat prompt with its
``<ImageHere>`` slot as the guide's client writes it, 490 px CLIP pixels, and the BLS tensors
field by field with its LoRA adapter: weights and config with the first request, the task id
alone afterwards."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gateway.config import ServedModel
from gateway.errors import InvalidRequest
from gateway.families.calls import GenerationRequest
from gateway.families.cogvlm import CogVLM
from gateway.families.internlm_xcomposer2 import InternLMXComposer2
from gateway.pipeline.lora import lora_choice
from gateway.triton.contract import parse_model_config
from gateway.triton.lora import LoraLedger
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent

# The guide's deployment: Howe-Young/tensorrtllm_backend @76a0d1f53335a9f08b6a750c278651458813948e.
GUIDE = "Howe-Young/tensorrtllm_backend @76a0d1f5"


def test_prompt_is_the_guides_client_prompt() -> None:
    """Golden value: the prompt tools/internlm_xcomposer2/client.py of the guide's deployment
    builds (GUIDE) for ``--text "Please describe this image in detail."``: its meta instruction
    as Python evaluates it (the first line only), the InternLM2 frame, ``<ImageHere>`` before the
    question; the deployment's preprocessing (all_models/internlm_xcomposer2/preprocessing/1/
    model.py, same commit) splits there and raises IndexError without it."""
    question = "Please describe this image in detail."
    expected = (
        "[UNUSED_TOKEN_146]system\nYou are an AI assistant whose name is InternLM-XComposer "
        "(浦语·灵笔).\n[UNUSED_TOKEN_145]\n[UNUSED_TOKEN_146]user\n<ImageHere>"
        f"{question}[UNUSED_TOKEN_145]\n[UNUSED_TOKEN_146]assistant\n"
    )
    text = InternLMXComposer2().render(conversation(("user", question, 1)))
    assert text == expected
    before, after = text.split("<ImageHere>")  # the deployment's split: exactly two parts
    assert before.endswith("user\n") and after.startswith(question)


def test_system_and_history_in_the_internlm2_frame() -> None:
    chat = conversation(
        ("user", "What?", 1), ("assistant", "A cat.", 0), ("user", "Colour?", 0), system="Be brief."
    )
    assert InternLMXComposer2().render(chat) == (
        "[UNUSED_TOKEN_146]system\nBe brief.[UNUSED_TOKEN_145]\n"
        "[UNUSED_TOKEN_146]user\n<ImageHere>What?[UNUSED_TOKEN_145]\n"
        "[UNUSED_TOKEN_146]assistant\nA cat.[UNUSED_TOKEN_145]\n"
        "[UNUSED_TOKEN_146]user\nColour?[UNUSED_TOKEN_145]\n"
        "[UNUSED_TOKEN_146]assistant\n"
    )


def test_user_text_may_not_carry_a_second_image_slot() -> None:
    with pytest.raises(InvalidRequest, match="reserved marker"):
        InternLMXComposer2().check_text(conversation(("user", "<ImageHere> hi", 1)))


def test_the_guides_ensemble_shape_3_490_490() -> None:
    """The guide's ensemble declares ``image_input`` FP16 dims [3, 490, 490] (GUIDE,
    all_models/internlm_xcomposer2/ensemble/config.pbtxt): one image, no image axis."""
    contract = parse_model_config(
        {
            "name": "ensemble",
            "max_batch_size": 32,
            "input": [
                {"name": "text_input", "data_type": "TYPE_STRING", "dims": [-1]},
                {"name": "max_tokens", "data_type": "TYPE_INT32", "dims": [-1]},
                {"name": "image_input", "data_type": "TYPE_FP16", "dims": [3, 490, 490]},
            ],
        }
    )
    request = generation(
        "internlm_xcomposer2", conversation(("user", "Describe.", 1)), [sample_image()]
    )
    inputs = sent(request, contract)
    assert inputs["image_input"][:2] == ("FP16", [1, 3, 490, 490])
    assert inputs["text_input"][2][0].count("<ImageHere>") == 1


def test_same_pixels_as_cogvlm() -> None:
    image = sample_image(500, 400)
    np.testing.assert_array_equal(
        InternLMXComposer2().prepare_image(image), CogVLM().prepare_image(image)
    )


def write_adapter(folder: Path) -> None:
    folder.mkdir()
    np.save(folder / "model.lora_weights.npy", np.full((1, 6, 32), 0.5, np.float16))
    np.save(folder / "model.lora_config.npy", np.ones((1, 6, 3), np.int32))


async def with_lora(
    request: GenerationRequest, served: ServedModel, ledger: LoraLedger
) -> GenerationRequest:
    """What prepare_chat adds for the model's adapter."""
    choice = await lora_choice(served, ledger, None)
    assert choice is not None
    return replace(
        request,
        lora_task_id=choice.task_id,
        lora_weights=choice.weights,
        lora_config=choice.config,
    )


async def test_bls_tensors_with_lora_first_use_then_id_only(tmp_path: Path) -> None:
    write_adapter(tmp_path / "xc2-lora")
    lora = {"task_id": 1, "weights_path": str(tmp_path / "xc2-lora")}
    image = sample_image(640, 480)
    request = generation(
        "internlm_xcomposer2", conversation(("user", "Describe.", 1)), [image], lora=lora
    )
    served = ServedModel(id="m", family="internlm_xcomposer2", triton_model="t", lora=lora)
    ledger = LoraLedger()
    contract = ensemble(bls=True)

    first = sent(await with_lora(request, served, ledger), contract)
    assert first["lora_task_id"] == ("UINT64", [1, 1], np.array([[1]], np.uint64))
    assert first["lora_weights"][:2] == ("FP16", [1, 6, 32])
    assert (first["lora_weights"][2] == np.float16(0.5)).all()
    assert first["lora_config"][:2] == ("INT32", [1, 6, 3])
    assert first["image_input"][:2] == ("FP16", [1, 1, 3, 490, 490])
    assert first["text_input"][2] == [
        InternLMXComposer2().render(conversation(("user", "Describe.", 1)))
    ]
    assert first["stop_words"][2] == ["[UNUSED_TOKEN_145]"]

    ledger.delivered_ok(1)  # what relay() records once the server answered
    later = sent(await with_lora(request, served, ledger), contract)
    assert "lora_task_id" in later and "lora_weights" not in later and "lora_config" not in later
