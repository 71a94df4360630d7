"""Phi-3-vision (contract only: remote code, not in transformers): the HD crop grid, the
global view against torch's bicubic interpolation, token counts, Phi-3's chat form, and the
tensors field by field with the HD size in ``image_sizes_input``."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.families.phi3_vision import (
    CROP,
    Phi3Vision,
    features_for,
    global_view,
    hd_image,
    hd_size,
    preprocess_hd,
)
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent

SIZES = [(640, 480), (300, 1000), (2000, 100), (336, 336)]


@pytest.mark.parametrize("size", SIZES)
def test_hd_grid_holds_at_most_16_crops(size: tuple[int, int]) -> None:
    image = sample_image(*size)
    height, width = hd_size(size[1], size[0])
    assert hd_image(image).size == (width, height)
    assert height % CROP == 0 and width % CROP == 0
    assert (height // CROP) * (width // CROP) <= 16


def test_known_grids_and_token_counts() -> None:
    assert hd_size(480, 640) == (1008, 1344)  # 3 x 4 crops
    assert features_for(480, 640) == (12 + 1) * 144 + 1 + 4 * 12 == 1921
    assert Phi3Vision.features_per_image == features_for(16 * CROP, CROP) == 2653


def test_global_view_is_torchs_bicubic_interpolation() -> None:
    torch = pytest.importorskip("torch")
    pixels = np.random.default_rng(0).standard_normal((3, 1008, 1344)).astype(np.float32)
    expected = torch.nn.functional.interpolate(
        torch.from_numpy(pixels)[None], size=(CROP, CROP), mode="bicubic"
    )[0].numpy()
    np.testing.assert_allclose(global_view(pixels), expected, atol=1e-5)


def test_crops_follow_the_global_view_row_by_row_then_zeros() -> None:
    image = sample_image(640, 480)
    out = preprocess_hd(image)
    assert out.shape == (17, 3, CROP, CROP)
    assert out[1:13].any(axis=(1, 2, 3)).all() and not out[13:].any()


def test_chat_form_with_the_image_in_its_turn() -> None:
    chat = conversation(
        ("user", "Which city?", 1), ("assistant", "Singapore.", 0), ("user", "Sure?", 0)
    )
    assert Phi3Vision().render(chat) == (
        "<|user|>\n<|image_1|>\nWhich city?<|end|>\n<|assistant|>\nSingapore.<|end|>\n"
        "<|user|>\nSure?<|end|>\n<|assistant|>\n"
    )


def test_wire_tensors_field_by_field() -> None:
    image = sample_image(640, 480)
    contract = ensemble(("image_sizes_input", "TYPE_INT64", [-1, 2]))
    inputs = sent(generation("phi3_vision", conversation(("user", "q", 1)), [image]), contract)
    assert inputs["image_input"][:2] == ("FP16", [1, 17, 3, 336, 336])
    assert inputs["image_sizes_input"][:2] == ("INT64", [1, 1, 2])
    assert inputs["image_sizes_input"][2].tolist() == [[[1008, 1344]]]  # the HD size
    assert inputs["stop_words"][2] == ["<|end|>"]
    assert inputs["text_input"][2] == ["<|user|>\n<|image_1|>\nq<|end|>\n<|assistant|>\n"]
