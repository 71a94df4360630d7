"""Server-side templates: NVIDIA's wrapping, features spliced between prefix and question."""

from __future__ import annotations

from server_repo.reference_kit.archs import LlavaArch, LlavaOnevisionArch
from server_repo.reference_kit.templates import (
    LLAVA,
    LLAVA_ONEVISION,
    MediaSlot,
    build_prompt,
)
from server_repo.reference_kit.tiny_tokenizer import build_hf_tokenizer


def test_rendered_templates_match_nvidia_preprocessing() -> None:
    assert LLAVA.render("Why?", "<F>") == "USER:\n<F>Why? ASSISTANT:"
    assert (
        LLAVA_ONEVISION.render("Why?", "<F>")
        == "<|im_start|>user <F>\nWhy?<|im_end|><|im_start|>assistant\n"
    )


def test_llava_prompt_layout() -> None:
    tokenizer = build_hf_tokenizer(LlavaArch.special_tokens)
    slots = [MediaSlot(7, 3), MediaSlot(7, 2)]
    prompt = build_prompt(tokenizer, LLAVA, "Why?", slots)
    head = tokenizer("USER:\n")["input_ids"]
    tail = tokenizer("Why? ASSISTANT:", add_special_tokens=False)["input_ids"]
    assert prompt.token_ids == (*head, 7, 7, 7, 7, 7, *tail)
    assert prompt.token_ids[0] == tokenizer.bos_token_id
    assert prompt.media_mask == (False,) * len(head) + (True,) * 5 + (False,) * len(tail)
    assert prompt.media_tokens == 5


def test_text_only_onevision_prompt() -> None:
    tokenizer = build_hf_tokenizer(LlavaOnevisionArch.special_tokens)
    prompt = build_prompt(tokenizer, LLAVA_ONEVISION, "hi")
    assert not any(prompt.media_mask)
    text = tokenizer.decode(prompt.token_ids)
    assert text == "<|im_start|>user \nhi<|im_end|><|im_start|>assistant\n"
