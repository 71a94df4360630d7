"""Deplot (Pix2Struct): flattened patches equal to transformers' Pix2StructImageProcessor
(within float rounding of its torch resize), an empty prompt, an encoder-decoder's ids."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest
from gateway.families.deplot import MAX_PATCHES, flattened_patches, patch_grid
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent

# Reached: 3e-4 at most (values are standardised, |x| < 2); both resample with an antialiased
# bilinear filter, PIL in float32 and torch in float32, summing in different orders.
TOLERANCE = 1e-3


@pytest.mark.parametrize("size", [(640, 480), (2000, 300), (30, 40)])
def test_patches_equal_the_hf_processor(size: tuple[int, int]) -> None:
    module = pytest.importorskip("transformers.models.pix2struct.image_processing_pil_pix2struct")
    processor = module.Pix2StructImageProcessorPil(is_vqa=False, max_patches=MAX_PATCHES)
    image = sample_image(*size)
    expected = processor(image, return_tensors="np")["flattened_patches"][0]
    mine = flattened_patches(image)
    assert mine.shape == expected.shape == (2048, 770)
    np.testing.assert_allclose(mine, expected, atol=TOLERANCE, rtol=0)
    rows, cols = patch_grid(size[1], size[0])
    assert not mine[rows * cols :].any() and mine[rows * cols - 1, :2].tolist() == [rows, cols]


def test_prompt_is_empty_and_an_image_is_required() -> None:
    family_chat = conversation(("user", "Generate underlying data table of the figure below:", 1))
    request = generation("deplot", family_chat, [sample_image()])
    assert request.text_input == ""
    with pytest.raises(InvalidRequest, match="needs an image"):
        generation("deplot", conversation(("user", "table?", 0)))


def test_wire_tensors_fit_the_declared_rank() -> None:
    request = generation("deplot", conversation(("user", "", 1)), [sample_image()])
    three_d = ensemble(replace={})
    inputs = sent(request, three_d)
    assert inputs["image_input"][:2] == ("FP16", [1, 1, 1, 2048, 770])  # dims [-1, -1, -1, -1]
    assert inputs["end_id"][2].item() == 1 and inputs["pad_id"][2].item() == 0
    assert "prompt_table_extra_id" not in inputs
