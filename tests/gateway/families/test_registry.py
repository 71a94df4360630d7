"""Every registered family: a name that matches its key, a question it can render, and
image or video tensors of the type its tensor path declares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gateway.families.base import Conversation, Family, Turn
from gateway.families.registry import SUPPORTED_FAMILIES, get_family

VISION = sorted(n for n, f in SUPPORTED_FAMILIES.items() if f.image_tensor is not None)


@pytest.mark.parametrize("name", sorted(SUPPORTED_FAMILIES))
def test_registry_key_is_the_family_name(name: str) -> None:
    assert get_family(name).name == name


def test_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="llava_next"):
        get_family("llava-9")


@pytest.mark.parametrize("name", VISION)
def test_one_image_question_renders_and_stacks(name: str) -> None:
    family: Family = get_family(name)
    conversation = Conversation(None, (Turn("user", "What is this?", images=1),))
    family.check_conversation(conversation)
    assert isinstance(family.render(conversation), str)
    array = family.prepare_image(Image.new("RGB", (320, 240), (10, 200, 30)))
    tensor = family.stack_images([array])
    expected = np.float16 if family.image_tensor == "image_input" else np.uint8
    assert tensor.dtype == expected and tensor.shape[0] == 1


@pytest.mark.parametrize("name", VISION)
def test_declared_limits_are_consistent(name: str) -> None:
    family = SUPPORTED_FAMILIES[name]
    assert family.features_per_image is not None and family.features_per_image > 0
    assert family.default_end_id != -1 and family.default_pad_id != -1
    if family.requires_image:
        assert family.max_images is None or family.max_images >= 1


def test_every_family_has_a_row_in_the_docs_table() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "families.md"
    table = docs.read_text()
    missing = [name for name in SUPPORTED_FAMILIES if f"`{name}`" not in table]
    assert not missing, f"docs/families.md lacks {missing}"
