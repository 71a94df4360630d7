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
    default = engine.complete(media.request(FAMILY, max_tokens=4))
    assert default.stats.input_tokens == 588  # (896 / 32) x (672 / 32)
    started = engine.complete(media.request(FAMILY, max_tokens=4, decoder_text="<s>"))
    assert started.token_ids == default.token_ids  # <s> is the decoder start token
    other = engine.complete(media.request(FAMILY, max_tokens=4, decoder_text="# Title"))
    assert other.token_ids != default.token_ids


def test_rejects_other_page_sizes(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="896"):
        engine.generate(GenerationRequest("", images=np.zeros((1, 3, 448, 336), np.float16)))
