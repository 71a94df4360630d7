"""LLaVA-NeXT: anyres tiles equal to transformers' LlavaNextImageProcessor (PIL backend),
feature counts equal to its processor's, the image size alongside, Mistral turns."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from gateway.families.base import max_multimodal_len
from gateway.families.llava_next import GRID_PINPOINTS, LlavaNext, best_resolution, features_for
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent

SIZES = [(640, 480), (300, 900), (1000, 200), (336, 336), (50, 70), (2000, 1500)]


def hf_processor():  # type: ignore[no-untyped-def]
    module = pytest.importorskip("transformers.models.llava_next.image_processing_pil_llava_next")
    return module.LlavaNextImageProcessorPil(
        size={"shortest_edge": 336},
        crop_size={"height": 336, "width": 336},
        image_grid_pinpoints=[list(p) for p in GRID_PINPOINTS],
    )


@pytest.mark.parametrize("size", SIZES)
def test_tiles_equal_the_hf_processor(size: tuple[int, int]) -> None:
    image = sample_image(*size)
    out = hf_processor()(image, return_tensors="np")
    mine = LlavaNext().prepare_image(image)
    hf = out["pixel_values"][0]
    np.testing.assert_array_equal(mine, hf[: mine.shape[0]])
    assert not hf[mine.shape[0] :].any()  # HF pads the patch axis with zeros only
    assert list(out["image_sizes"][0]) == [size[1], size[0]]


@pytest.mark.parametrize("size", SIZES)
def test_feature_count_equals_the_hf_processor(size: tuple[int, int]) -> None:
    module = pytest.importorskip("transformers.models.llava_next.processing_llava_next")
    processor = module.LlavaNextProcessor.__new__(module.LlavaNextProcessor)
    processor.image_processor = hf_processor()
    processor.patch_size = 14
    processor.num_additional_image_tokens = 0
    width, height = size
    expected = processor._get_number_of_features(height, width, 336, 336)
    assert features_for(height, width) == expected <= LlavaNext.features_per_image


def test_best_resolution_prefers_least_waste() -> None:
    assert best_resolution(480, 640) == (672, 672)
    assert best_resolution(200, 1000) == (336, 1008)


def test_mistral_turns_around_the_server_template() -> None:
    chat = conversation(
        ("user", "Hi", 1), ("assistant", "Hello.", 0), ("user", "Colour?", 0), system="Be brief."
    )
    # The server wraps this as "[INST] " + features + "\n" + text + " [/INST]".
    assert LlavaNext().render(chat) == "Be brief.\n\nHi [/INST] Hello.</s>[INST] Colour?"


def test_wire_tensors_carry_the_tiles_and_the_original_size() -> None:
    image = sample_image(640, 480)
    contract = ensemble(("image_sizes_input", "TYPE_INT64", [2]))
    inputs = sent(generation("llava_next", conversation(("user", "q", 1)), [image]), contract)
    assert inputs["image_input"][:2] == ("FP16", [1, 5, 3, 336, 336])
    assert inputs["image_sizes_input"][:2] == ("INT64", [1, 2])
    assert inputs["image_sizes_input"][2].tolist() == [[480, 640]]
    without = sent(generation("llava_next", conversation(("user", "q", 1)), [image]), ensemble())
    assert "image_sizes_input" not in without


def test_engine_size() -> None:
    assert max_multimodal_len(1, LlavaNext.features_per_image, 1) == 2928


def test_detail_low_fits_one_tile_and_costs_fewer_image_tokens() -> None:
    family = LlavaNext()
    image = Image.new("RGB", (1000, 800))
    low = family.image_for_detail(image, "low")
    assert max(low.size) == 336
    low_tokens = family.image_tokens([(low.height, low.width)])
    assert low_tokens == features_for(low.height, low.width)  # a 336 x 672 canvas at most
    assert family.image_tokens([(800, 1000)]) == features_for(800, 1000) > low_tokens
    assert family.image_for_detail(image, "original") is image
