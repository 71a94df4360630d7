"""The step loop against an independent oracle: transformers' own greedy ``generate``.

The kit prefills with its own embeddings and prefix cache and decodes one token at a time; HF
``generate`` gets the same prompt ids and pixels and must pick the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from server_repo.reference_kit.archs.llava_onevision import image_inputs, video_pixels
from server_repo.reference_kit.generate import StopRule
from tests.server_repo.samples import llava_pixels, rgb_image

MAX_NEW = 10


def _hf_greedy(engine: ReferenceEngine, request: GenerationRequest, **pixels: Any) -> list[int]:
    prompt = engine.prepare(request).prompt
    input_ids = torch.tensor([prompt.token_ids])
    with torch.inference_mode():
        output = engine.model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=request.max_tokens,
            do_sample=False,
            eos_token_id=engine.eos_token_id,
            pad_token_id=engine.tokenizer.pad_token_id,
            **pixels,
        )
    return output[0, input_ids.shape[1] :].tolist()


def _kit_greedy(engine: ReferenceEngine, request: GenerationRequest) -> list[int]:
    ids = engine.complete(request).token_ids
    assert len(ids) == request.max_tokens or ids[-1] == engine.eos_token_id
    return ids


@pytest.mark.parametrize("images", [None, 1, 2])
def test_llava_matches_hf_generate(llava_engine: ReferenceEngine, images: int | None) -> None:
    pixels = llava_pixels(7, images) if images else None
    request = GenerationRequest("What is shown here?", images=pixels, max_tokens=MAX_NEW)
    extra = {"pixel_values": torch.from_numpy(pixels).float()} if images else {}
    assert _kit_greedy(llava_engine, request) == _hf_greedy(llava_engine, request, **extra)


@pytest.mark.parametrize("count", [0, 1])  # NVIDIA's preprocessing reads one image a request
def test_onevision_images_match_hf_generate(onevision_engine: ReferenceEngine, count: int) -> None:
    pixels = rgb_image(3, 60, 90, count) if count else None
    request = GenerationRequest("What is shown here?", images=pixels, max_tokens=MAX_NEW)
    extra = image_inputs(onevision_engine.assets.processor, pixels) if count else {}
    assert _kit_greedy(onevision_engine, request) == _hf_greedy(onevision_engine, request, **extra)


def test_onevision_video_matches_hf_generate(onevision_engine: ReferenceEngine) -> None:
    frames = rgb_image(4, 40, 50, count=3)
    request = GenerationRequest("What happens?", video=frames, max_tokens=MAX_NEW)
    pixels = video_pixels(onevision_engine.assets.processor, frames, 384)
    kit = _kit_greedy(onevision_engine, request)
    assert kit == _hf_greedy(onevision_engine, request, pixel_values_videos=pixels)


def test_media_changes_the_answer(
    llava_engine: ReferenceEngine, onevision_engine: ReferenceEngine
) -> None:
    """The tiny weights are not degenerate: the pixels matter (so pixel bugs are visible)."""
    llava = {
        tuple(_kit_greedy(llava_engine, GenerationRequest("Hi", images=llava_pixels(s))))
        for s in range(3)
    }
    onevision = {
        tuple(_kit_greedy(onevision_engine, GenerationRequest("Hi", images=rgb_image(s))))
        for s in range(3)
    }
    assert len(llava) == 3 and len(onevision) == 3


def test_stop_word_stays_in_output(llava_engine: ReferenceEngine) -> None:
    base = llava_engine.complete(GenerationRequest("Tell me a story.", max_tokens=12))
    stop_text = llava_engine.decode(base.token_ids[3:5])
    stopped = llava_engine.complete(
        GenerationRequest("Tell me a story.", max_tokens=12, stop_words=(stop_text,))
    )
    assert stopped.stats.finish_reason == "stop_word"
    stop_ids = llava_engine.encode(stop_text)
    assert stopped.token_ids[-len(stop_ids) :] == stop_ids
    assert stopped.token_ids == base.token_ids[: len(stopped.token_ids)]
    assert len(stopped.token_ids) <= 5


def test_end_id_stops_and_is_counted(llava_engine: ReferenceEngine) -> None:
    base = llava_engine.complete(GenerationRequest("Tell me a story.", max_tokens=6))
    end_id = base.token_ids[2]
    first = base.token_ids.index(end_id)
    ended = llava_engine.complete(
        GenerationRequest("Tell me a story.", max_tokens=6, end_id=end_id)
    )
    assert ended.token_ids == base.token_ids[: first + 1]
    assert ended.stats.output_tokens == first + 1 and ended.stats.finish_reason == "end_id"
    assert ended.steps[-1].text == llava_engine.decode([end_id])


def test_end_id_minus_one_never_stops_at_eos(llava_engine: ReferenceEngine) -> None:
    eos = llava_engine.eos_token_id
    request = GenerationRequest("q", max_tokens=5, end_id=-1, bad_words=(), min_tokens=0)
    completion = llava_engine.complete(request)
    assert completion.stats.output_tokens == 5
    rule = StopRule(end_id=-1, stop_sequences=(), max_tokens=5)
    assert rule.reason([eos]) is None
    assert StopRule(end_id=eos, stop_sequences=(), max_tokens=5).reason([eos]) == "end_id"


def test_eos_decodes_to_empty_text(llava_engine: ReferenceEngine) -> None:
    assert llava_engine.decode([llava_engine.eos_token_id]) == ""


def test_cancellation_stops_generation(llava_engine: ReferenceEngine) -> None:
    calls = {"n": 0}

    def cancelled() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    generation = llava_engine.generate(GenerationRequest("q", max_tokens=50), cancelled)
    steps = list(generation)
    assert len(steps) == 3
    assert generation.stats.cancelled and generation.stats.finish_reason == "cancelled"


def test_seeded_sampling_is_reproducible(
    fresh_engine: Callable[..., ReferenceEngine],
) -> None:
    engine = fresh_engine("llava_onevision")
    request = GenerationRequest("Hi", max_tokens=12, temperature=0.9, top_k=40, top_p=0.9, seed=9)
    first, second = engine.complete(request), engine.complete(request)
    assert first.token_ids == second.token_ids
    other = engine.complete(
        GenerationRequest("Hi", max_tokens=12, temperature=0.9, seed=10, top_k=40)
    )
    assert other.token_ids != first.token_ids
    assert np.all(np.array(first.token_ids) < len(engine.tokenizer))
