"""``pipeline/_media_budget.py``: the image-token budgets, a model's and the server's."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import MediaSettings, ServedModel
from gateway.errors import MediaTooLarge
from gateway.families.registry import get_family
from gateway.pipeline._media_budget import check_image_budget, media_tokens
from gateway.pipeline._media_jobs import PreparedItem
from gateway.protocol.common import MediaTokens
from gateway.runtime import ServedRuntime


def served(family: str = "llava_onevision", **config: Any) -> ServedRuntime:
    model = ServedModel(id="m", family=family, triton_model="t", triton_url="x:1", **config)
    return ServedRuntime(model, get_family(family), client=None)  # type: ignore[arg-type]


def test_a_models_own_budget_applies_before_the_servers() -> None:
    tokens = MediaTokens(image_tokens=1500)
    check_image_budget(tokens, served(), MediaSettings())  # no cap anywhere
    with pytest.raises(MediaTooLarge) as caught:
        check_image_budget(tokens, served(max_image_tokens=1000), MediaSettings())
    assert caught.value.code == "image_token_budget_exceeded"
    assert "model 'm' (max_image_tokens) allows at most 1000" in caught.value.message
    server = MediaSettings(max_image_tokens_per_request=1200)
    with pytest.raises(MediaTooLarge, match="max_image_tokens_per_request"):
        check_image_budget(tokens, served(), server)
    check_image_budget(MediaTokens(image_tokens=900), served(max_image_tokens=1000), server)


def test_tokens_are_counted_per_modality() -> None:
    family = get_family("llava")
    items = [PreparedItem(array=None, decode_s=0, preprocess_s=0, pixels=1)] * 3  # type: ignore[arg-type]
    assert media_tokens(family, items, video=False) == MediaTokens(image_tokens=3 * 576)


def test_usage_details_carry_only_the_modalities_present() -> None:
    from gateway.protocol.common import UsageCounts

    plain = UsageCounts(10, 2).to_dict()
    assert "prompt_tokens_details" not in plain
    cached = UsageCounts(10, 2, cached_tokens=4).to_dict()
    assert cached["prompt_tokens_details"] == {"cached_tokens": 4}
    imaged = UsageCounts(10, 2, media=MediaTokens(image_tokens=6)).to_dict()
    assert imaged["prompt_tokens_details"] == {"cached_tokens": 0, "image_tokens": 6}
    both = MediaTokens(image_tokens=6) + MediaTokens(image_tokens=6, video_tokens=1)
    assert both == MediaTokens(image_tokens=12, video_tokens=1)


def test_several_choices_count_their_media_once_each() -> None:
    """``n`` choices are ``n`` Triton requests, each reading the images (as prompt_tokens)."""
    from gateway.families.calls import Outcome
    from gateway.pipeline.choices import summed
    from gateway.protocol.common import UsageCounts

    one = Outcome("stop", UsageCounts(700, 3, media=MediaTokens(image_tokens=576)))
    total = summed([one, one])
    assert total.usage.prompt_tokens == 1400
    assert total.usage.media == MediaTokens(image_tokens=1152)
    plain = summed([Outcome("stop", UsageCounts(5, 1))] * 2)
    assert plain.usage.media is None
