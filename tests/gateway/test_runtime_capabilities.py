"""A served model's ``Capabilities`` are built once, from the contract its Triton declares,
and the family configured at start-up is never changed by reading that contract."""

from __future__ import annotations

from gateway.config import ServedModel
from gateway.families.registry import get_family
from gateway.families.whisper.family import Whisper
from gateway.runtime import ServedRuntime
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
