"""Qwen2-VL: raw pixels processed server-side, M-RoPE positions, the chat template."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.archs.qwen2_vl import rope_positions
from tests.server_repo.reference_kit.hf_oracle import hf_greedy, kit_greedy
from tests.server_repo.samples import rgb_image

FAMILY = "qwen2_vl"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_text_only_matches_hf_generate(engine: ReferenceEngine) -> None:
    text_only = GenerationRequest("What is shown here?", 8)
    assert kit_greedy(engine, text_only) == hf_greedy(engine, text_only)


def test_504_px_gives_324_features_inside_the_chat_template(engine: ReferenceEngine) -> None:
    prepared = engine.prepare(GenerationRequest("Why?", images=rgb_image(3, 504, 504)))
    prompt = prepared.prompt
    assert prompt.media_tokens == 324  # 36 x 36 patches of 14 px, merged 2 x 2
    text = engine.tokenizer.decode(list(prompt.token_ids))
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|>" + "<|image_pad|>" * 324 + "<|vision_end|>Why?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    positions, delta = rope_positions(
        engine.model, prompt, prepared.features.extra["image_grid_thw"]
    )
    assert positions.shape == (3, 1, len(prompt))
    assert int(positions.max()) + 1 == len(prompt) + delta  # generation continues from there
    assert delta == 18 - 324  # the image spans 18 positions instead of 324


def test_rejects_non_rgb_pixels(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="RGB"):
        engine.generate(GenerationRequest("q", images=np.zeros((1, 56, 56, 4), np.uint8)))
