"""The engine: validation, token counting with visual features, streaming parity, threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.archs.llava_onevision import (
    image_feature_count,
    video_feature_count,
)
from tests.server_repo.samples import llava_pixels, rgb_image


def _prompt_len(engine: ReferenceEngine, text: str) -> int:
    return len(engine.prepare(GenerationRequest(text)).prompt)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"images": np.zeros((3, 336, 336), np.float16)}, "4-D"),
        ({"images": np.zeros((1, 3, 336, 336), np.int32)}, "float16"),
        ({"images": np.zeros((1, 3, 224, 224), np.float16)}, "336"),
        ({"video": np.zeros((2, 8, 8, 3), np.uint8)}, "not supported"),
        ({"beam_width": 2}, "beam_width"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_llava_rejects_bad_requests(
    llava_engine: ReferenceEngine, options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        llava_engine.generate(GenerationRequest("q", **options))


@pytest.mark.parametrize(
    "options",
    [
        {"images": np.zeros((1, 8, 8, 3), np.float32)},
        {"images": np.zeros((1, 8, 8, 4), np.uint8)},
        {"video": np.zeros((8, 8, 3), np.uint8)},
        {"images": np.zeros((0, 8, 8, 3), np.uint8)},
    ],
)
def test_onevision_rejects_bad_media(
    onevision_engine: ReferenceEngine, options: dict[str, object]
) -> None:
    with pytest.raises(InvalidRequest):
        onevision_engine.generate(GenerationRequest("q", **options))


def test_llava_counts_576_features_per_image(llava_engine: ReferenceEngine) -> None:
    text_only = _prompt_len(llava_engine, "Compare them.")
    request = GenerationRequest("Compare them.", images=llava_pixels(1, 2), max_tokens=3)
    generation = llava_engine.generate(request)
    assert generation.stats.input_tokens == text_only + 2 * 576
    list(generation)
    stats = generation.stats
    assert stats.output_tokens == 3
    assert stats.total_blocks == -(-(stats.input_tokens + 3) // 16)


@pytest.mark.parametrize(("height", "width"), [(48, 64), (64, 48), (300, 700), (800, 800)])
def test_onevision_image_feature_count(
    onevision_engine: ReferenceEngine, height: int, width: int
) -> None:
    text_only = _prompt_len(onevision_engine, "q")
    request = GenerationRequest("q", images=rgb_image(0, height, width))
    assert len(onevision_engine.prepare(request).prompt) == text_only + image_feature_count(
        height, width
    )


def test_onevision_image_and_video_feature_counts(onevision_engine: ReferenceEngine) -> None:
    text_only = _prompt_len(onevision_engine, "q")
    both = GenerationRequest("q", images=rgb_image(0, 50, 60), video=rgb_image(1, 30, 40, 4))
    prompt = onevision_engine.prepare(both).prompt
    expected = image_feature_count(50, 60) + video_feature_count(4)
    assert video_feature_count(4) == 785
    assert len(prompt) == text_only + expected == text_only + prompt.media_tokens


def test_onevision_refuses_a_second_image_as_nvidias_preprocessing_fails_on_it(
    onevision_engine: ReferenceEngine,
) -> None:
    """tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd: ``llava_onevision_process_image`` asserts one
    image per query, so a request's second image_bytes_input image fails there."""
    two = GenerationRequest("q", images=rgb_image(0, 50, 60, 2))
    with pytest.raises(InvalidRequest, match="reads one per request"):
        onevision_engine.prepare(two)


@pytest.mark.parametrize("family", ["llava", "llava_onevision"])
def test_streamed_steps_join_to_the_full_text(
    family: str, llava_engine: ReferenceEngine, onevision_engine: ReferenceEngine
) -> None:
    engine = llava_engine if family == "llava" else onevision_engine
    request = GenerationRequest(
        "Tell me about it.", max_tokens=16, temperature=0.8, top_k=50, seed=5
    )
    completion = engine.complete(request)
    assert "".join(step.text for step in completion.steps) == completion.text
    assert completion.text


def test_concurrent_generations_match_sequential(llava_engine: ReferenceEngine) -> None:
    requests = [GenerationRequest(f"Question {i}?", max_tokens=8) for i in range(4)]
    sequential = [llava_engine.complete(r).token_ids for r in requests]
    with ThreadPoolExecutor(2) as pool:
        concurrent = [c.token_ids for c in pool.map(llava_engine.complete, requests)]
    assert concurrent == sequential


def test_max_tokens_past_the_positions_is_reduced_to_what_the_prompt_leaves(
    llava_engine: ReferenceEngine,
) -> None:
    """As TensorRT-LLM's LlmRequest::validate does (a warning there, not an error)."""
    prepared = llava_engine.prepare(GenerationRequest("q", max_tokens=50_000))
    room = llava_engine.max_positions - len(prepared.prompt)
    assert prepared.request.max_tokens == room
    assert llava_engine.prepare(GenerationRequest("q", max_tokens=7)).request.max_tokens == 7
