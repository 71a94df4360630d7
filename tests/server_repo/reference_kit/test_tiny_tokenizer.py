"""The tiny tokenizer: deterministic, ASCII per token, family special tokens in place."""

from __future__ import annotations

import pytest

from server_repo.reference_kit.archs import LlavaArch, LlavaOnevisionArch
from server_repo.reference_kit.tiny_tokenizer import build_hf_tokenizer, train_tokenizer

SAMPLE = "Describe the picture: a red car, 42 apples & naïve café\tdone.\n"


@pytest.mark.parametrize("arch", [LlavaArch, LlavaOnevisionArch])
def test_training_is_deterministic(arch: type) -> None:
    first = train_tokenizer(arch.special_tokens).to_str()
    second = train_tokenizer(arch.special_tokens).to_str()
    assert first == second


@pytest.mark.parametrize("arch", [LlavaArch, LlavaOnevisionArch])
def test_every_token_decodes_to_ascii_alone(arch: type) -> None:
    tokenizer = build_hf_tokenizer(arch.special_tokens)
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id], skip_special_tokens=True)
        assert text.isascii(), (token_id, text)


@pytest.mark.parametrize("arch", [LlavaArch, LlavaOnevisionArch])
def test_per_token_deltas_join_to_the_full_decode(arch: type) -> None:
    tokenizer = build_hf_tokenizer(arch.special_tokens)
    ids = tokenizer(SAMPLE, add_special_tokens=False)["input_ids"]
    deltas = [tokenizer.decode([i], skip_special_tokens=True) for i in ids]
    assert "".join(deltas) == tokenizer.decode(ids, skip_special_tokens=True)
    # Non-ASCII bytes become <unk>, which is special and skipped.
    assert "".join(deltas) == SAMPLE.replace("ï", "").replace("é", "")


def test_llava_tokens_and_bos() -> None:
    tokenizer = build_hf_tokenizer(LlavaArch.special_tokens)
    ids = tokenizer("USER:\n")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id == tokenizer.convert_tokens_to_ids("<s>")
    assert tokenizer.eos_token == "</s>"
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    assert tokenizer("a <image> b", add_special_tokens=False)["input_ids"].count(image_id) == 1


def test_onevision_tokens_without_bos() -> None:
    tokenizer = build_hf_tokenizer(LlavaOnevisionArch.special_tokens)
    ids = tokenizer("<|im_start|>user ")["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    for token in ("<image>", "<video>", "<|im_end|>"):
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1
