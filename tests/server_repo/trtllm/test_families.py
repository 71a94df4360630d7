"""The repository tool's family facts and the gateway's are one set: read, not copied."""

import pytest

from gateway.families.registry import get_family
from server_repo.trtllm.families import SUPPORTED_FAMILIES


@pytest.mark.parametrize("spec", SUPPORTED_FAMILIES.values(), ids=lambda spec: spec.name)
def test_each_spec_states_what_its_gateway_family_does(spec) -> None:
    family = get_family(spec.gateway_family)
    assert (spec.image_tensor, spec.end_id, spec.pad_id) == (
        family.image_tensor,
        family.default_end_id,
        family.default_pad_id,
    )
    # A family that takes images has a visual-feature budget, and the gateway's own count of
    # one image's features (where it has one) fits in it.
    assert (spec.features_per_image > 0) == (family.image_tensor is not None)
    if family.features_per_image is not None:
        assert spec.features_per_image >= family.features_per_image
    assert spec.layout == ("whisper" if family.accepts_audio else "multimodal")


def test_the_gateway_configs_the_tool_writes_carry_the_familys_ids() -> None:
    mllama = SUPPORTED_FAMILIES["mllama"]
    assert (mllama.end_id, mllama.pad_id) == (128001, 128004)  # Llama 3.2's <|end_of_text|>
    assert SUPPORTED_FAMILIES["llava_onevision"].image_tensor == "image_bytes_input"
