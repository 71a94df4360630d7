"""Mllama: images reach the decoder through cross-attention, from each <|image|> on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import family_media
from tests.server_repo.reference_kit.hf_oracle import hf_greedy, kit_greedy
from tests.server_repo.samples import rgb_image

FAMILY = "mllama"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_an_image_matches_hf_generate(engine: ReferenceEngine) -> None:
    one = GenerationRequest("<|image|>A picture of", 6, images=rgb_image(4, 50, 70))
    assert kit_greedy(engine, one) == hf_greedy(engine, one)


def test_a_second_image_is_refused_as_nvidias_preprocessing_fails_on_it(
    engine: ReferenceEngine,
) -> None:
    """tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd: ``mllama_process`` pairs image i with query i,
    so a request's second image_bytes_input image has no query (IndexError)."""
    two = GenerationRequest("<|image|>A<|image|>B", 6, images=rgb_image(4, 50, 70, count=2))
    with pytest.raises(InvalidRequest, match="reads one per request"):
        engine.generate(two)


def test_prompt_is_the_text_and_nothing_is_reused(engine: ReferenceEngine) -> None:
    request = family_media(FAMILY, 0).request(FAMILY, max_tokens=3)
    prompt = engine.prepare(request).prompt
    assert prompt.media_tokens == 0 and prompt.token_ids[0] == engine.tokenizer.bos_token_id
    assert engine.decode(list(prompt.token_ids)) == "Describe the picture."
    for _ in range(2):
        completion = engine.complete(request)
    assert completion.stats.reused_blocks == 0


@pytest.mark.parametrize(
    ("text", "count"), [("no marker", 1), ("<|image|><|image|>two", 1), ("<|image|>stray", 0)]
)
def test_image_markers_must_match_the_images(
    engine: ReferenceEngine, text: str, count: int
) -> None:
    images = rgb_image(1, 40, 40, count=count) if count else None
    with pytest.raises(InvalidRequest, match="<\\|image\\|>"):
        engine.generate(GenerationRequest(text, images=images))
