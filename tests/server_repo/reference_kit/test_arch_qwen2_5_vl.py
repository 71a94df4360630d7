"""Qwen2.5-VL as NVIDIA's llmapi model prompts it: finished text prompts, chat-templated images."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoTokenizer

from server_repo.reference_kit import ReferenceEngine
from server_repo.reference_kit.archs import get_arch
from server_repo.reference_kit.archs.qwen2_5_vl import (
    CHAT_TEMPLATE,
    IMAGE_PLACEHOLDER,
    user_content,
)
from server_repo.reference_kit.llmapi_request import LlmapiRequest
from server_repo.reference_kit.weights import publish_pretrained_tokenizer, write_tiny_checkpoint
from tests.server_repo.samples import rgb_image

SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine("qwen2_5_vl")


def test_placeholders_go_before_the_text_once_per_image() -> None:
    assert user_content("Hi", 0) == "Hi"
    assert user_content("Hi", 2) == f"{IMAGE_PLACEHOLDER}\n{IMAGE_PLACEHOLDER}\nHi"
    # One already in the text is counted, not added again (add_multimodal_placeholders).
    placed = f"Before {IMAGE_PLACEHOLDER} after"
    assert user_content(placed, 2) == f"{IMAGE_PLACEHOLDER}\n{placed}"


def test_a_text_prompt_is_taken_as_finished(engine: ReferenceEngine) -> None:
    text = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    prompt = engine.prepare(LlmapiRequest(text, 4)).prompt
    assert engine.tokenizer.decode(list(prompt.token_ids)) == text
    assert not any(prompt.media_mask)


def test_images_are_rendered_with_the_chat_template(engine: ReferenceEngine) -> None:
    pictures = (rgb_image(1, 56, 56)[0], rgb_image(2, 56, 112)[0])
    prompt = engine.prepare(LlmapiRequest("Why?", 4, pictures=pictures)).prompt
    first, second = "<|image_pad|>" * 4, "<|image_pad|>" * 8  # 2 x 2 and 2 x 4 merged patches
    assert engine.tokenizer.decode(list(prompt.token_ids)) == (
        f"{SYSTEM}<|im_start|>user\n<|vision_start|>{first}<|vision_end|>\n"
        f"<|vision_start|>{second}<|vision_end|>\nWhy?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert prompt.media_tokens == 12


def test_an_image_answer_depends_on_the_image(engine: ReferenceEngine) -> None:
    answers = {
        engine.complete(LlmapiRequest("What?", 8, pictures=(rgb_image(seed, 56, 56)[0],))).text
        for seed in (1, 2, 3)
    }
    assert len(answers) > 1


def test_the_published_tokenizer_folder_carries_the_chat_template(
    engine: ReferenceEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a gateway pointed at ``$MMGW_REFERENCE_TOKENIZERS/<model>`` renders prompts with."""
    monkeypatch.setenv("MMGW_REFERENCE_TOKENIZERS", str(tmp_path))
    folder = publish_pretrained_tokenizer(engine.tokenizer, "reference_qwen2_5_vl")
    assert folder == tmp_path / "reference_qwen2_5_vl"
    loaded = AutoTokenizer.from_pretrained(folder)
    assert loaded.chat_template == CHAT_TEMPLATE
    rendered = loaded.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == f"{SYSTEM}<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_tiny_weights_are_seeded_and_small(tmp_path: Path) -> None:
    arch = get_arch("qwen2_5_vl")
    for copy in ("a", "b"):
        write_tiny_checkpoint(arch, tmp_path / copy)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert sum(p.stat().st_size for p in (tmp_path / "a").iterdir()) < 4_000_000
    assert AutoConfig.from_pretrained(tmp_path / "a").architectures == [
        "Qwen2_5_VLForConditionalGeneration"
    ]
