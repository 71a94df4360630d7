"""Deplot (Pix2Struct): flattened patches in, the vision encoder is the whole encoder."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import deplot_patches, family_media
from tests.server_repo.reference_kit.hf_oracle import hf_greedy, kit_greedy

FAMILY = "deplot"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_greedy_matches_hf_generate_and_follows_the_image(engine: ReferenceEngine) -> None:
    answers = []
    for seed in (0, 1):
        request = family_media(FAMILY, seed).request(FAMILY)
        answers.append(kit_greedy(engine, request))
        assert answers[-1] == hf_greedy(engine, request)
    assert answers[0] != answers[1]


def test_text_is_ignored_and_every_patch_row_is_an_input_position(
    engine: ReferenceEngine,
) -> None:
    media = family_media(FAMILY, 0)
    plain = engine.complete(media.request(FAMILY, max_tokens=4))
    asked = engine.complete(GenerationRequest("Any question", 4, images=media.images))
    assert plain.token_ids == asked.token_ids
    assert plain.stats.input_tokens == 2048 and plain.stats.reused_blocks == 0


@pytest.mark.parametrize(
    ("images", "message"),
    [
        (None, "needs an image"),
        (np.zeros((1, 2048, 770), np.float16), "no patch"),
        (deplot_patches(0)[:, :, :700], "770"),
    ],
)
def test_rejects_what_the_encoder_cannot_read(
    engine: ReferenceEngine, images: np.ndarray | None, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        engine.generate(GenerationRequest("", images=images))
