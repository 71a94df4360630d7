"""InternLM-XComposer2 (contract only: remote code): the question inside the server's
InternLM2 frame, 490 px CLIP pixels, and the BLS tensors field by field with its LoRA
adapter: weights and config with the first request, the task id alone afterwards."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from gateway.config import ServedModel
from gateway.families.calls import GenerationRequest
from gateway.families.cogvlm import CogVLM
from gateway.families.internlm_xcomposer2 import InternLMXComposer2
from gateway.pipeline.lora import lora_choice
from gateway.triton.lora import LoraLedger
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


def test_question_and_history_inside_the_server_frame() -> None:
    assert InternLMXComposer2().render(conversation(("user", "Describe.", 1))) == "Describe."
    chat = conversation(("user", "What?", 1), ("assistant", "A cat.", 0), ("user", "Colour?", 0))
    assert InternLMXComposer2().render(chat) == (
        "What?[UNUSED_TOKEN_145]\n[UNUSED_TOKEN_146]assistant\nA cat.[UNUSED_TOKEN_145]\n"
        "[UNUSED_TOKEN_146]user\nColour?"
    )


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
    assert first["text_input"][2] == ["Describe."]
    assert first["stop_words"][2] == ["[UNUSED_TOKEN_145]"]

    ledger.delivered_ok(1)  # what relay() records once the server answered
    later = sent(await with_lora(request, served, ledger), contract)
    assert "lora_task_id" in later and "lora_weights" not in later and "lora_config" not in later
