"""Kosmos-2: BOS <image> + 64 resampled features + </image>, then the text."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import family_media

FAMILY = "kosmos2"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_64_features_between_the_image_tags(engine: ReferenceEngine) -> None:
    prompt = engine.prepare(family_media(FAMILY, 0).request(FAMILY)).prompt
    ids, tokens = list(prompt.token_ids), engine.tokenizer.convert_tokens_to_ids
    assert ids[:2] == [engine.tokenizer.bos_token_id, tokens("<image>")]
    assert prompt.media_mask == (False, False) + (True,) * 64 + (False,) * (len(ids) - 66)
    assert ids[66] == tokens("</image>")
    assert engine.decode(ids[67:]) == "An image of"  # <grounding> is special: skipped


def test_rejects_other_image_sizes(engine: ReferenceEngine) -> None:
    images = np.zeros((1, 3, 336, 336), np.float16)
    with pytest.raises(InvalidRequest, match="224"):
        engine.generate(GenerationRequest("q", images=images))
