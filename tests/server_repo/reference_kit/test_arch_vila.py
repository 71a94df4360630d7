"""VILA stand-in: SigLIP 384 features placed as NVIDIA's VILA preprocessing places them, by its
``max_num_images`` rule; greedy output equal to transformers' own generate."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.archs.vila import POST_PROMPT, PRE_PROMPT, VilaArch
from server_repo.reference_kit.templates import MediaSlot
from tests.server_repo.reference_kit.hf_oracle import hf_greedy, kit_greedy

FAMILY = "vila"


def siglip_pixels(seed: int, count: int = 1) -> np.ndarray:
    """SigLIP-normalised pixels ``[count, 3, 384, 384]`` fp16, deterministic per seed."""
    return np.random.default_rng(seed).uniform(-1, 1, (count, 3, 384, 384)).astype(np.float16)


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_markers_become_feature_runs_between_the_vicuna_prompts(engine: ReferenceEngine) -> None:
    """Golden layout: tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
    model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``_process_multi_image_inputs`` and
    ``_create_request`` with ``max_num_images`` > 1: BOS + pre-prompt, the text split at each
    ``<image>`` (parts without special tokens) with one image's features there, BOS + post."""
    tokenizer = engine.tokenizer
    slots = (MediaSlot(5, 3), MediaSlot(5, 2))
    prompt = VilaArch(4).build_prompt(tokenizer, "<image>\n<image>\n Compare.", slots)

    def ids(text: str, special: bool) -> list[int]:
        return list(tokenizer(text, add_special_tokens=special)["input_ids"])

    newline = ids("\n", False)
    expected = [
        *ids(PRE_PROMPT, True),
        *[5] * 3,
        *newline,
        *[5] * 2,
        *ids("\n Compare.", False),
        *ids(POST_PROMPT, True),
    ]
    assert list(prompt.token_ids) == expected
    assert prompt.media_tokens == 5 and prompt.token_ids.count(tokenizer.bos_token_id) == 2


def test_without_the_split_a_marker_stays_text(engine: ReferenceEngine) -> None:
    """Same file, ``max_num_images`` unset or 1: no split; the features follow the pre-prompt
    and ``<image>`` reaches the model as text."""
    tokenizer = engine.tokenizer
    prompt = VilaArch(1).build_prompt(tokenizer, "<image>\nWhat?", (MediaSlot(5, 4),))
    question = list(tokenizer("<image>\nWhat?")["input_ids"])
    assert tokenizer.decode(question, skip_special_tokens=True) == "<image>\nWhat?"
    head = list(tokenizer(PRE_PROMPT)["input_ids"])
    assert list(prompt.token_ids[: len(head) + 4]) == [*head, 5, 5, 5, 5]
    assert list(prompt.token_ids[len(head) + 4 :]) == [
        *question,
        *tokenizer(POST_PROMPT)["input_ids"],
    ]
    with pytest.raises(InvalidRequest, match="takes one"):
        VilaArch(1).build_prompt(tokenizer, "Compare.", (MediaSlot(5, 1), MediaSlot(5, 1)))


def test_markers_must_match_the_images(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="1 images but 0 <image> markers"):
        engine.generate(GenerationRequest("What?", images=siglip_pixels(1)))
    with pytest.raises(InvalidRequest, match="2 images but 1 <image> markers"):
        engine.generate(GenerationRequest("<image>\nWhat?", images=siglip_pixels(1, 2)))


def test_729_siglip_features_per_image_and_greedy_equal_to_hf(engine: ReferenceEngine) -> None:
    request = GenerationRequest(
        "<image>\n<image>\nCompare.", max_tokens=5, images=siglip_pixels(2, 2)
    )
    assert engine.prepare(request).prompt.media_tokens == 2 * 729
    assert kit_greedy(engine, request) == hf_greedy(engine, request)
