"""CogVLM stand-in: NVIDIA's runner's prompt layout and position ids, used by every step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from server_repo.reference_kit import (
    GenerationRequest,
    InvalidRequest,
    ReferenceEngine,
    load_engine,
)
from server_repo.reference_kit.archs.cogvlm import BOI, EOI, position_ids

FAMILY = "cogvlm"
QUESTION = " [INST] please describe this image [/INST] "


def pixels(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (1, 3, 490, 490)).astype(np.float16)


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def runner_position_ids(length: int) -> torch.Tensor:
    """NVIDIA/TensorRT-LLM tensorrt_llm/runtime/multimodal_model_runner.py
    @033f406702a726877a9df9eb4931f0661cf0a39a, ``prepare_position_ids_for_cogvlm``, verbatim
    in effect: arange, then [2:1227] = 2, then [1227:] = arange(3, length + 1 - 1225)."""
    ids = torch.arange(length)
    ids[2:1227] = 2
    ids[1227:] = torch.arange(3, length + 1 - 1225)
    return ids


def test_position_ids_are_the_runners() -> None:
    length = 1240
    assert torch.equal(position_ids(0, length), runner_position_ids(length))
    assert torch.equal(position_ids(1230, 3), runner_position_ids(1233)[1230:])
    assert position_ids(length, 1).item() == length - 1224  # generated tokens go on from there


def test_prompt_is_bos_then_the_image_then_the_text(engine: ReferenceEngine) -> None:
    """The runner's ``setup_fake_prompts``: ``[pre_input_ids[:, 0:1], features,
    pre_input_ids[:, 1:]]`` with the image framed by begin- and end-of-image."""
    tokenizer = engine.tokenizer
    prompt = engine.prepare(GenerationRequest(QUESTION, 2, images=pixels(0))).prompt
    boi, eoi = tokenizer.convert_tokens_to_ids([BOI, EOI])
    text = list(tokenizer(QUESTION, add_special_tokens=False)["input_ids"])
    assert prompt.token_ids[:2] == (tokenizer.bos_token_id, boi)
    assert prompt.token_ids[1226 + 1] == eoi and list(prompt.token_ids[1228:]) == text
    assert prompt.media_tokens == 1225


def test_generation_uses_the_positions(engine: ReferenceEngine, reference_cache: Path) -> None:
    """The same prompt at sequential positions (what a Triton backend without position ids
    computes) answers differently: the positions reach the model."""
    request = GenerationRequest(QUESTION, 6, images=pixels(1), temperature=0.0, top_k=1)
    with_positions = engine.complete(request)
    sequential = load_engine(FAMILY, cache_dir=reference_cache, device="cpu")  # its own cache
    sequential.arch.step_inputs = lambda *args: None  # type: ignore[method-assign,assignment]
    assert with_positions.token_ids != sequential.complete(request).token_ids


def test_one_image_is_required(engine: ReferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="one 490 x 490 image"):
        engine.generate(GenerationRequest(QUESTION, 2))
