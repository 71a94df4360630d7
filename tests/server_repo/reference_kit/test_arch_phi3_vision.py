"""Phi-3-vision stand-in: the runner's HD feature transform over the crops the gateway sends,
as many features as Phi-3-vision's processor counts, at ``<|image_1|>``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from gateway.families.phi3_vision import Phi3Vision, features_for
from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.archs.phi3_vision import hd_feature_transform
from tests.gateway.families.contracts import sample_image

FAMILY = "phi3_vision"
PROMPT = "<|user|>\n<|image_1|>\nWhat is shown?<|end|>\n<|assistant|>\n"


@pytest.fixture(scope="module")
def engine(family_engine: Callable[[str], ReferenceEngine]) -> ReferenceEngine:
    return family_engine(FAMILY)


def test_hd_transform_layout_is_the_runners() -> None:
    """NVIDIA/TensorRT-LLM tensorrt_llm/runtime/multimodal_model_runner.py
    @033f406702a726877a9df9eb4931f0661cf0a39a, ``PhiMMUtils.hd_feature_transform``: the crops'
    grids side by side (row-major over crops), a newline after every row, the separator, then
    the global view's grid with its newlines."""
    dim, rows, cols = 3, 1, 2
    crops = torch.arange((1 + rows * cols) * 144 * dim, dtype=torch.float32).view(-1, 144, dim)
    sub_gn, glb_gn = torch.full((dim,), -1.0), torch.full((dim,), -2.0)
    out = hd_feature_transform(crops, rows, cols, sub_gn, glb_gn)
    assert out.shape == ((rows * 12) * (cols * 12 + 1) + 1 + 12 * 13, dim)
    first_row = out[: cols * 12 + 1]
    assert torch.equal(first_row[:12], crops[1, :12])  # crop 1's first grid row
    assert torch.equal(first_row[12:24], crops[2, :12])  # then crop 2's
    assert torch.equal(first_row[24], sub_gn)  # then the newline
    separator = (rows * 12) * (cols * 12 + 1)
    assert torch.equal(out[separator], glb_gn)
    assert torch.equal(out[separator + 1 : separator + 13], crops[0, :12])


@pytest.mark.parametrize("size", [(640, 480), (300, 900), (1600, 200)])
def test_feature_count_is_the_processors(engine: ReferenceEngine, size: tuple[int, int]) -> None:
    family = Phi3Vision()
    image = sample_image(*size)
    pixels = family.stack_images([family.prepare_image(image)])[0]
    hd = family.image_sizes([(image.height, image.width)])
    assert hd is not None
    request = GenerationRequest(PROMPT, 2, images=pixels, image_sizes=hd[0])
    prompt = engine.prepare(request).prompt
    assert prompt.media_tokens == features_for(image.height, image.width)
    assert prompt.token_ids[0] == engine.tokenizer.bos_token_id
    assert prompt.token_ids.count(engine.tokenizer.bos_token_id) == 1


def test_the_hd_size_is_required_and_checked(engine: ReferenceEngine) -> None:
    family = Phi3Vision()
    pixels = family.stack_images([family.prepare_image(sample_image())])[0]
    with pytest.raises(InvalidRequest, match="image_sizes_input"):
        engine.generate(GenerationRequest(PROMPT, images=pixels))
    with pytest.raises(InvalidRequest, match="multiples of 336"):
        bad = torch.tensor([[500, 700]]).numpy()
        engine.generate(GenerationRequest(PROMPT, images=pixels, image_sizes=bad))
