"""Deplot (Pix2Struct): flattened patches in, the vision encoder is the whole encoder."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import deplot_patches, family_media

FAMILY = "deplot"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


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
