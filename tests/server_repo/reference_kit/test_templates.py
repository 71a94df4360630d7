"""Server-side templates: NVIDIA's wrapping, features spliced between prefix and question."""

from __future__ import annotations

from server_repo.reference_kit.archs import LlavaArch, LlavaOnevisionArch
from server_repo.reference_kit.templates import (
    BLIP2_OPT,
    FUYU,
    KOSMOS2,
    LLAVA,
    LLAVA_NEXT,
    LLAVA_ONEVISION,
    NO_PROMPT,
    QWEN2_VL,
    MediaSlot,
    PromptTemplate,
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


def test_family_templates_match_what_nvidia_preprocessing_adds() -> None:
    assert BLIP2_OPT.render("Q", "<F>") == "<F></s>Q"
    assert FUYU.render("Q", "<F>") == "<F><s>Q<0x04>"
    assert KOSMOS2.render("Q", "<F>") == "<image><F></image>Q"
    assert LLAVA_NEXT.render("Q", "<F>") == "[INST] <F>\nQ [/INST]"
    assert NO_PROMPT.render("ignored", "<F>") == "<F>"
    assert QWEN2_VL.render("Q", "<F>").endswith(
        "<|im_start|>user\n<|vision_start|><F><|vision_end|>Q<|im_end|>\n<|im_start|>assistant\n"
    )


def test_media_first_and_wrapped_media_layouts() -> None:
    tokenizer = build_hf_tokenizer(LlavaOnevisionArch.special_tokens)
    first = build_prompt(tokenizer, BLIP2_OPT, "Why?", [MediaSlot(7, 3)])
    assert first.media_mask[:3] == (True,) * 3 and not any(first.media_mask[3:])
    wrapped = PromptTemplate("A", "{text}", media_open="<|im_start|>", media_close="<|im_end|>")
    prompt = build_prompt(tokenizer, wrapped, "B", [MediaSlot(7, 2), MediaSlot(7, 1)])
    marks = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    assert prompt.token_ids[1:] == (
        marks[0],
        7,
        7,
        marks[1],
        marks[0],
        7,
        marks[1],
        *tokenizer("B")["input_ids"],
    )
    assert prompt.media_tokens == 3
