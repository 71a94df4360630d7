"""NeVA and Video-NeVA stand-ins: NeMo's whole template from the client, the features where its
one media marker stands, the text pieces without special tokens."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import PROMPTS, family_media


@pytest.fixture(scope="module")
def engines(family_engine: Callable[[str], ReferenceEngine]) -> Callable[[str], ReferenceEngine]:
    return family_engine


@pytest.mark.parametrize(
    ("family", "marker", "features"), [("neva", "<image>", 729), ("video_neva", "<video>", 3 * 256)]
)
def test_features_stand_where_the_marker_stood(
    engines: Callable[[str], ReferenceEngine], family: str, marker: str, features: int
) -> None:
    """The layout docs/families.md asks of a NeVA deployment; the pieces are tokenized as
    NVIDIA's runner tokenizes NeVA's (sentencepiece ``encode``: no BOS; NVIDIA/TensorRT-LLM
    tensorrt_llm/runtime/multimodal_model_runner.py @033f406702a726877a9df9eb4931f0661cf0a39a)."""
    engine = engines(family)
    request = family_media(family, 0).request(family, max_tokens=4)
    prompt = engine.prepare(request).prompt
    before, after = PROMPTS[family].split(marker)
    head = list(engine.tokenizer(before, add_special_tokens=False)["input_ids"])
    tail = list(engine.tokenizer(after, add_special_tokens=False)["input_ids"])
    assert prompt.media_tokens == features
    assert list(prompt.token_ids[: len(head)]) == head
    assert list(prompt.token_ids[len(head) + features :]) == tail
    assert engine.tokenizer.convert_tokens_to_ids("<extra_id_1>") in tail  # one token each


@pytest.mark.parametrize("family", ["neva", "video_neva"])
def test_one_marker_and_one_media_item(
    engines: Callable[[str], ReferenceEngine], family: str
) -> None:
    engine = engines(family)
    media = family_media(family, 0)
    with pytest.raises(InvalidRequest, match="exactly one"):
        engine.generate(GenerationRequest("no marker", images=media.images))
    if family == "neva":
        two = np.concatenate([media.images, media.images])
        with pytest.raises(InvalidRequest, match="exactly one"):
            engine.generate(GenerationRequest(PROMPTS[family], images=two))
