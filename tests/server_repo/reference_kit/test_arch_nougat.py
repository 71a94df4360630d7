"""Nougat: a Swin encoder reads an 896 x 672 page into 588 positions; mBART decodes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import family_media

FAMILY = "nougat"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_588_encoder_positions_and_a_decoder_prompt(engine: ReferenceEngine) -> None:
    media = family_media(FAMILY, 0)
    started = engine.complete(media.request(FAMILY, max_tokens=4, decoder_text="<s>"))
    assert started.stats.input_tokens == 588  # (896 / 32) x (672 / 32)
    other = engine.complete(media.request(FAMILY, max_tokens=4, decoder_text="# Title"))
    assert other.token_ids != started.token_ids


def test_without_a_decoder_prompt_decoding_starts_at_pad_as_nvidias_preprocessing_does(
    engine: ReferenceEngine,
) -> None:
    """tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd: no ``DECODER_QUERY`` -> ``decoder_input_id =
    pad_id``; NVIDIA's runner starts Nougat at ``<s>`` instead, so the two differ."""
    media = family_media(FAMILY, 0)
    tokenizer = engine.tokenizer
    assert engine.decoder_start(media.request(FAMILY)) == [tokenizer.pad_token_id]  # type: ignore[attr-defined]
    at_pad = engine.complete(media.request(FAMILY, max_tokens=4))
    padded = engine.complete(media.request(FAMILY, max_tokens=4, decoder_text=tokenizer.pad_token))
    assert at_pad.token_ids == padded.token_ids
    started = engine.complete(media.request(FAMILY, max_tokens=4, decoder_text="<s>"))
    assert started.token_ids != at_pad.token_ids


def test_rejects_other_page_sizes(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="896"):
        engine.generate(GenerationRequest("", images=np.zeros((1, 3, 448, 336), np.float16)))
