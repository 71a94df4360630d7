"""LLaVA-NeXT: anyres patches plus the image size; unpadded tile features with row newlines."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.archs.llava_next import anyres_patch_count
from tests.server_repo.family_samples import family_media

FAMILY = "llava_next"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_features_are_the_base_view_plus_the_unpadded_grid(engine: ReferenceEngine) -> None:
    """300 x 500 fits the 336 x 672 canvas: a 24 x 48 grid, 4 padding columns cut on each
    side (500 px scaled to 40 columns), a newline per row, after the 576 base features."""
    prompt = engine.prepare(family_media(FAMILY, 0).request(FAMILY)).prompt
    assert prompt.media_tokens == 576 + 24 * (40 + 1)
    text = engine.prepare(GenerationRequest("What is shown here?")).prompt
    assert len(prompt) == len(text) + prompt.media_tokens
    assert engine.decode(list(text.token_ids)) == "[INST] \nWhat is shown here? [/INST]"
    assert anyres_patch_count(300, 500) == 3 and anyres_patch_count(800, 800) == 5


@pytest.mark.parametrize(
    ("sizes", "patches", "message"),
    [
        (None, 3, "image_sizes_input"),
        (np.array([[800, 800]]), 3, "needs 5"),
        (np.array([[300]]), 3, r"\[n, 2\]"),
        (np.array([[300, 500]]), 2, "needs 3"),
    ],
)
def test_rejects_patches_that_do_not_match_the_sizes(
    engine: ReferenceEngine, sizes: np.ndarray | None, patches: int, message: str
) -> None:
    images = np.zeros((patches, 3, 336, 336), np.float16)
    request = GenerationRequest("q", images=images, image_sizes=sizes)
    with pytest.raises(InvalidRequest, match=message):
        engine.generate(request)
