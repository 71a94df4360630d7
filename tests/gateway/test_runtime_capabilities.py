"""A served model's ``Capabilities`` are built once, from the contract its Triton declares,
and the family configured at start-up is never changed by reading that contract (nor by a
second served model of the same family); its generation policy is bound once, from the
settings' tables and its own entry."""

from __future__ import annotations

from gateway.config import EmbeddedSettings, ServedModel, Settings, Timeouts
from gateway.families.base import Conversation, Turn
from gateway.families.registry import get_family
from gateway.families.whisper.family import Whisper
from gateway.media.decoder import InProcessDecoder
from gateway.runtime import Runtime, ServedRuntime, build_runtime
from tests.fakes.triton import FakeTriton


def served(family: str, triton_model: str) -> ServedRuntime:
    config = ServedModel(id="m", family=family, triton_model=triton_model, triton_url="f:1")
    return ServedRuntime(config, get_family(family), FakeTriton(url="f:1"))  # type: ignore[arg-type]


async def test_capabilities_come_from_the_contract_met_and_are_built_once() -> None:
    guided = served("llava_onevision", "ensemble_onevision")
    await guided.get_contract()
    assert guided.capabilities is guided.capabilities  # fixed once read
    assert guided.capabilities.guided_decoding and guided.capabilities.image_tensor_declared
    unguided = served("llava_onevision", "ensemble_unguided")
    await unguided.get_contract()
    assert not unguided.capabilities.guided_decoding  # NVIDIA's ensemble as shipped
    minimal = served("llava", "ensemble_minimal")
    await minimal.get_contract()
    caps = minimal.capabilities
    assert caps.takes("image") and not caps.image_tensor_declared and not caps.lora


async def test_a_family_with_several_contracts_is_bound_not_changed() -> None:
    whisper = served("whisper", "whisper")
    configured = whisper.family
    await whisper.get_contract()
    assert isinstance(whisper.family, Whisper) and whisper.family is not configured
    assert whisper.family.spec.contract == "direct"
    assert isinstance(configured, Whisper) and configured._spec is None


async def start(*models: ServedModel, **tables: object) -> Runtime:
    """A runtime over one fake Triton, media decoded in-process (no worker process)."""
    settings = Settings.model_validate(
        {"models": models, "embedded": EmbeddedSettings(enabled=False), **tables}
    )
    fake = FakeTriton(url="f:1")
    return await build_runtime(settings, connect=lambda url: fake, decoder=InProcessDecoder())  # type: ignore[arg-type,return-value]


async def test_two_models_of_one_family_with_different_max_images_keep_their_own() -> None:
    """VILA's prompt depends on the deployment's max_num_images: each served model gets its
    own configured family (``engine_images`` returns a copy), neither changes the other's."""
    several = ServedModel(id="several", family="vila", triton_model="ensemble",
                          triton_url="f:1", max_images=4)  # fmt: skip
    one = ServedModel(id="one", family="vila", triton_model="ensemble", triton_url="f:1")
    runtime = await start(several, one)
    try:
        chat = Conversation(None, (Turn("user", "Describe.", 1),))
        assert runtime.model("several").family.render(chat) == "<image>\nDescribe."
        assert runtime.model("one").family.render(chat) == "Describe."
        assert runtime.model("several").capabilities.family_max_images is None
        assert runtime.model("one").capabilities.family_max_images == 1
    finally:
        await runtime.aclose()


async def test_each_served_model_is_bound_its_generation_policy_once() -> None:
    """The pipeline reads a request's limits from ``served.policy``: [generation] and
    [upstream] met with the model's own entry when the runtime binds it."""
    capped = ServedModel(id="capped", family="llava", triton_model="ensemble",
                         triton_url="f:1", default_max_tokens=50_000)  # fmt: skip
    free = ServedModel(id="free", family="llava", triton_model="ensemble", triton_url="f:1",
                       default_max_tokens=None)  # fmt: skip
    runtime = await start(
        capped, free,
        generation={"max_tokens": 1000, "max_prompt_chars": 77},
        upstream={"first_token_timeout_s": 5, "token_timeout_s": 2, "request_timeout_s": 60},
        observability={"log_bodies": True},
    )  # fmt: skip
    try:
        policy = runtime.model("capped").policy
        assert policy is runtime.model("capped").policy  # built once
        assert (policy.max_tokens, policy.default_max_tokens) == (1000, 1000)
        assert policy.max_prompt_chars == 77 and policy.log_prompts
        assert policy.timeouts == Timeouts(5.0, 2.0, 60.0)
        assert runtime.model("free").policy.default_max_tokens is None
    finally:
        await runtime.aclose()
