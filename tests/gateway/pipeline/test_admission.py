"""``admit``: every "can this model take it?" refusal, from the served model's capabilities,
before a byte is fetched; the tensors then only assert what it admitted."""

import numpy as np
import pytest

from gateway.config import MediaSettings
from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.base import Conversation, Turn
from gateway.families.calls import GenerationRequest
from gateway.families.capabilities import Capabilities
from gateway.families.registry import get_family
from gateway.pipeline.admission import admit
from gateway.pipeline.conversation import MediaPart
from gateway.triton.contract import parse_model_config
from gateway.triton.tensors import build_inputs

TEXT = [("text_input", "TYPE_STRING", [1]), ("max_tokens", "TYPE_INT32", [1])]
LIMITS = MediaSettings()


def contract(*extra: tuple[str, str, list[int]]):
    return parse_model_config(
        {
            "name": "m",
            "max_batch_size": 1,
            "input": [{"name": n, "data_type": t, "dims": d} for n, t, d in [*TEXT, *extra]],
        }
    )


def capabilities(family: str, declared, max_images: int | None = None) -> Capabilities:
    served = get_family(family)
    spec = declared.inputs.get(served.image_tensor or "")
    return Capabilities.of(
        "served",
        served,
        triton_model="m",
        contract=declared.kind,
        declares=declared.declares,
        engine_max_images=max_images,
        image_dims=spec.dims if spec is not None else None,
    )


def image(index: int) -> MediaPart:
    return MediaPart("image", ("messages", 0, "content", index), url=f"http://x/{index}.png")


IMAGE_INPUT = ("image_input", "TYPE_FP16", [-1, -1, -1, -1])


def test_images_to_a_deployment_without_an_image_input_are_refused_before_any_fetch() -> None:
    with pytest.raises(InvalidRequest, match="cannot take images") as info:
        admit(capabilities("llava", contract()), (image(0),), LIMITS)
    assert info.value.code == "images_not_supported" and info.value.status_code == 400
    admit(capabilities("llava", contract(IMAGE_INPUT)), (image(0),), LIMITS)


def test_a_lora_adapter_to_a_deployment_without_lora_inputs_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="cannot apply LoRA") as info:
        admit(capabilities("llava", contract()), (), LIMITS, lora=True)
    assert info.value.code == "lora_not_supported"
    lora = contract(("lora_task_id", "TYPE_UINT64", [1]))
    admit(capabilities("llava", lora), (), LIMITS, lora=True)


def test_the_family_limit_names_the_first_image_over_it_and_the_engine_limit_applies() -> None:
    with pytest.raises(TooManyMediaItems) as info:
        admit(capabilities("mllama", contract()), (image(0), image(1)), LIMITS)
    assert "is image 2 of this request" in info.value.message
    assert info.value.param == "messages[0].content[1]"
    engine = capabilities("llava", contract(IMAGE_INPUT), max_images=2)
    with pytest.raises(TooManyMediaItems, match="accepts at most 2 per request"):
        admit(engine, (image(0), image(1), image(2)), LIMITS)


def test_the_conversation_and_the_familys_own_rules_are_admitted_too() -> None:
    caps = capabilities("blip2_opt", contract())
    text_only = Conversation(None, (Turn("user", "hi"),))
    with pytest.raises(InvalidRequest) as info:
        admit(caps, (), LIMITS, conversation=text_only)
    assert info.value.code == "image_required"
    mllama = get_family("mllama")
    with_system = Conversation("be brief", (Turn("user", "what is it?", images=1),))
    with pytest.raises(InvalidRequest) as info:
        admit(
            capabilities("mllama", contract()), (image(0),), LIMITS,
            conversation=with_system, rules=mllama.conversation_rules,
        )  # fmt: skip
    assert info.value.code == "unsupported_system_message"


def test_kinds_and_mixes_are_refused_by_part() -> None:
    audio = MediaPart("audio", ("messages", 0, "content", 1), data="AAAA")
    with pytest.raises(InvalidRequest) as info:
        admit(capabilities("llava", contract()), (image(0), audio), LIMITS)
    assert info.value.code == "unsupported_content_part"
    assert info.value.param == "messages[0].content[1]"


def test_tensor_building_only_asserts_what_admission_guarantees() -> None:
    images = ("image_input", np.zeros((1, 1, 3, 4, 4), np.float16))
    with pytest.raises(AssertionError):
        build_inputs(GenerationRequest("x", 1, images=images), contract())
    with pytest.raises(AssertionError):
        build_inputs(GenerationRequest("x", 1, lora_task_id=3), contract())


def test_more_images_than_the_declared_image_tensor_carries_are_refused_before_any_fetch() -> None:
    """A deployment declaring image_input [3, -1, -1] (a v0.19 ensemble) carries one image:
    the tensor [1, n, 3, H, W] fits it only when n is 1. Refused by admit, before any fetch,
    not when the tensors are built from the decoded images."""
    narrow = contract(("image_input", "TYPE_FP16", [3, -1, -1]))
    caps = capabilities("llava", narrow)
    assert caps.tensor_max_images == 1 and caps.image_dims == (3, -1, -1)
    with pytest.raises(TooManyMediaItems) as info:
        admit(caps, (image(0), image(1)), LIMITS)
    assert info.value.code == "too_many_media_items" and info.value.param == "messages"
    assert info.value.message == (
        "this request has 2 images; model 'served' takes one per request: its Triton "
        "deployment declares 'image_input' with dims [3, -1, -1], which carries one image's "
        "pixels"
    )
    admit(caps, (image(0),), LIMITS)  # one image: its axis is dropped to fit
    one = np.zeros((1, 1, 3, 4, 4), np.float16)
    build_inputs(GenerationRequest("x", 1, images=("image_input", one)), narrow)
    assert capabilities("llava", contract(IMAGE_INPUT)).tensor_max_images is None
    assert capabilities("llava_next", narrow).tensor_max_images is None  # its axis: tiles
