"""BLIP-2 (OPT and Flan-T5): 32 Q-Former features first, HF ``generate`` as the oracle."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import family_media

FAMILIES = ("blip2_opt", "blip2_t5")


@pytest.mark.parametrize("family", FAMILIES)
def test_features_come_first_then_the_tokenized_text(
    family_engine: Callable[[str], ReferenceEngine], family: str
) -> None:
    engine = family_engine(family)
    prompt = engine.prepare(family_media(family, 0).request(family)).prompt
    text = engine.encode("Question: what is in the picture? Answer:")
    assert prompt.media_mask[:32] == (True,) * 32 and not any(prompt.media_mask[32:])
    if family == "blip2_opt":  # OPT's BOS is </s>, in front
        assert list(prompt.token_ids[32:]) == [engine.tokenizer.bos_token_id, *text]
    else:  # T5 appends </s>
        assert list(prompt.token_ids[32:]) == [*text, engine.eos_token_id]


@pytest.mark.parametrize(
    ("images", "message"),
    [
        (None, "needs an image"),
        (np.zeros((2, 3, 224, 224), np.float16), "one image"),
        (np.zeros((1, 3, 336, 336), np.float16), "224"),
    ],
)
def test_rejects_what_blip2_cannot_read(
    family_engine: Callable[[str], ReferenceEngine], images: np.ndarray | None, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        family_engine("blip2_opt").generate(GenerationRequest("q", images=images))
