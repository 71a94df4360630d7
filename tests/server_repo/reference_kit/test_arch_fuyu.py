"""Fuyu: linear patch embeddings, a |NEWLINE| per patch row, BOS, text, <0x04>."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.archs.fuyu import PAD_VALUE, image_feature_count, patchify
from tests.server_repo.family_samples import family_media

FAMILY = "fuyu"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_patch_rows_end_with_newlines_then_the_text(engine: ReferenceEngine) -> None:
    prompt = engine.prepare(family_media(FAMILY, 0).request(FAMILY)).prompt
    assert prompt.media_tokens == image_feature_count(90, 120) == 3 * (4 + 1)
    tail = list(prompt.token_ids[prompt.media_tokens :])
    assert tail[0] == engine.tokenizer.bos_token_id
    assert tail[-1] == engine.tokenizer.convert_tokens_to_ids("<0x04>")
    assert engine.decode(tail) == "What is shown here?"


def test_patchify_pads_with_the_processors_white() -> None:
    image = np.zeros((3, 31, 59), np.float32)
    patches, rows, cols = patchify(image)
    assert (rows, cols) == (2, 2) and patches.shape == (4, 2700)
    assert patches[0].min() == 0.0 and np.isclose(patches[3].min(), PAD_VALUE)


def test_rejects_images_beyond_the_canvas(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="1080"):
        engine.generate(GenerationRequest("q", images=np.zeros((1, 3, 1200, 60), np.float16)))
