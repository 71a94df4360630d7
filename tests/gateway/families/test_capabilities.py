"""``Capabilities``: what a served model takes, from its family, settings and Triton contract."""

import dataclasses

import pytest

from gateway.families.capabilities import GUIDE_INPUTS, Capabilities
from gateway.families.registry import get_family
from gateway.families.whisper.family import Whisper
from gateway.triton.contract import parse_model_config

TEXT = [("text_input", "TYPE_STRING", [1]), ("max_tokens", "TYPE_INT32", [1])]


def contract(*extra: str):
    names = [*TEXT, *((name, "TYPE_STRING", [1]) for name in extra)]
    return parse_model_config(
        {
            "name": "m",
            "max_batch_size": 1,
            "input": [{"name": n, "data_type": t, "dims": d} for n, t, d in names],
        }
    )


def capabilities(family: str, declared, max_images: int | None = None) -> Capabilities:
    return Capabilities.of(
        "served",
        get_family(family),
        triton_model="m",
        contract=declared.kind,
        declares=declared.declares,
        engine_max_images=max_images,
    )


def test_features_are_what_the_family_takes_and_the_deployment_declares() -> None:
    bare = capabilities("llava", contract())
    assert bare.takes("image") and not bare.takes("video") and not bare.takes("audio")
    assert not bare.image_tensor_declared  # llava's image_input is not declared here
    assert not (bare.lora or bare.guided_decoding or bare.extra_id)
    full = capabilities(
        "llava", contract("image_input", "lora_task_id", "prompt_table_extra_id", *GUIDE_INPUTS)
    )
    assert full.image_tensor_declared and full.lora and full.guided_decoding and full.extra_id
    # One guide input is not guided decoding: TensorRT-LLM needs its type and its text.
    assert not capabilities("llava", contract(GUIDE_INPUTS[0])).guided_decoding


def test_image_limits_keep_the_family_rule_and_the_engine_limit_apart() -> None:
    mllama = capabilities("mllama", contract(), max_images=4)
    assert mllama.family_max_images == 1 and mllama.engine_max_images == 4
    assert mllama.image_limit_message(2).startswith("this request has 2 images; model family")
    assert get_family("mllama").image_limit_message(2) == mllama.image_limit_message(2)


def test_a_family_that_does_not_send_its_extra_id_never_has_one() -> None:
    assert not capabilities("whisper", contract("prompt_table_extra_id")).extra_id


def test_capabilities_are_immutable() -> None:
    caps = capabilities("llava", contract())
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.lora = True  # type: ignore[misc]


def test_binding_a_family_to_its_contract_leaves_the_configured_instance_alone() -> None:
    family = get_family("whisper")
    assert isinstance(family, Whisper)
    declared = frozenset({"encoder_input_features", "decoder_input_ids", "request_output_len"})
    bound = family.bound(declared, "whisper")
    assert isinstance(bound, Whisper) and bound is not family
    assert bound.spec.contract == "direct"
    with pytest.raises(Exception, match="has not been read"):
        family.spec  # noqa: B018 - the configured instance learned nothing
    llava = get_family("llava")
    assert llava.bound(frozenset(), "m") is llava  # one contract: nothing to learn
