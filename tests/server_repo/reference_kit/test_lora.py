"""LoRA as TensorRT-LLM's Triton backend takes it: weights and config with a task id's first
use, the id alone afterwards, an uncached id refused with its message; the adapter changes the
answer."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from tests.server_repo.family_samples import PROMPTS, family_media, lora_adapter

FAMILY = "internlm_xcomposer2"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def request(**lora: object) -> GenerationRequest:
    media = family_media(FAMILY, 0)
    return GenerationRequest(
        PROMPTS[FAMILY], 6, images=media.images, temperature=0.0, top_k=1, **lora
    )


def test_first_use_with_weights_then_the_id_alone(engine: ReferenceEngine) -> None:
    weights, config = lora_adapter(1)
    base = engine.complete(request())
    first = engine.complete(request(lora_task_id=7, lora_weights=weights, lora_config=config))
    again = engine.complete(request(lora_task_id=7))
    assert first.token_ids == again.token_ids != base.token_ids
    assert engine.complete(request()).token_ids == base.token_ids  # the base model is untouched


def test_an_uncached_task_id_fails_as_tensorrt_llm_does(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="LoRA task 99 not found in cache"):
        engine.generate(request(lora_task_id=99))
    weights, _ = lora_adapter(2)
    with pytest.raises(InvalidRequest, match="lora_config"):
        engine.generate(request(lora_task_id=8, lora_weights=weights))
