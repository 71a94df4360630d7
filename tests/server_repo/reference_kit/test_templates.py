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


def test_llava_prompt_layout_has_a_bos_on_every_segment() -> None:
    """Golden layout: tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
    model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``_create_request``: the pre-prompt,
    the query and the post-prompt are each ``tokenizer.encode(..., add_special_tokens=True)``,
    so a Llama tokenizer puts BOS in front of all three (features after the pre-prompt)."""
    tokenizer = build_hf_tokenizer(LlavaArch.special_tokens)
    slots = [MediaSlot(7, 3), MediaSlot(7, 2)]
    prompt = build_prompt(tokenizer, LLAVA, "Why?", slots)
    bos = tokenizer.bos_token_id
    head = tokenizer("USER:\n")["input_ids"]
    question = tokenizer("Why?")["input_ids"]
    post = tokenizer(" ASSISTANT:")["input_ids"]
    assert head[0] == question[0] == post[0] == bos
    assert prompt.token_ids == (*head, 7, 7, 7, 7, 7, *question, *post)
    assert prompt.token_ids.count(bos) == 3
    text = len(question) + len(post)
    assert prompt.media_mask == (False,) * len(head) + (True,) * 5 + (False,) * text
    assert prompt.media_tokens == 5


def test_onevision_prompt_layout_has_the_newline_segment() -> None:
    """Golden layout: the same ``_create_request``: OneVision's pre-prompt, its features, an
    encoded ``\\n``, the query and the post-prompt, each tokenized alone."""
    tokenizer = build_hf_tokenizer(LlavaOnevisionArch.special_tokens)
    prompt = build_prompt(tokenizer, LLAVA_ONEVISION, "Why?", [MediaSlot(7, 2)])
    pieces = ["<|im_start|>user ", "\n", "Why?", "<|im_end|><|im_start|>assistant\n"]
    head, newline, question, post = (tokenizer(p)["input_ids"] for p in pieces)
    assert prompt.token_ids == (*head, 7, 7, *newline, *question, *post)


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
