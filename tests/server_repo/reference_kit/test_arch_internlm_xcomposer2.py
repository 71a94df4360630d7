"""InternLM-XComposer2 stand-in: the guide's ``<ImageHere>`` split, a BOS on each part, the
1225 CLIP-490 features between them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import PROMPTS, family_media

FAMILY = "internlm_xcomposer2"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_split_at_image_here_with_a_bos_on_each_part(engine: ReferenceEngine) -> None:
    """Golden layout: Howe-Young/tensorrtllm_backend all_models/internlm_xcomposer2/
    preprocessing/1/model.py @76a0d1f53335a9f08b6a750c278651458813948e, ``_create_request``:
    ``parts = text.split('<ImageHere>')``, ``tokenizer.encode(parts[0])``, the features,
    ``tokenizer.encode(parts[1])``."""
    prompt = engine.prepare(family_media(FAMILY, 0).request(FAMILY, max_tokens=2)).prompt
    before, after = PROMPTS[FAMILY].split("<ImageHere>")
    head = list(engine.tokenizer(before)["input_ids"])
    tail = list(engine.tokenizer(after)["input_ids"])
    bos = engine.tokenizer.bos_token_id
    assert head[0] == tail[0] == bos
    assert list(prompt.token_ids) == [*head, *[prompt.token_ids[len(head)]] * 1225, *tail]
    assert prompt.media_tokens == 1225
    assert engine.tokenizer.convert_tokens_to_ids("[UNUSED_TOKEN_146]") in head


def test_a_text_without_image_here_is_refused(engine: ReferenceEngine) -> None:
    """Where the guide's preprocessing raises IndexError (``parts[1]``), a clear refusal."""
    media = family_media(FAMILY, 0)
    with pytest.raises(InvalidRequest, match="one <ImageHere>"):
        engine.generate(GenerationRequest("Describe.", images=media.images))
