"""Start-up on NVIDIA's llmapi contract: a served model must fit the Triton model it names."""

from __future__ import annotations

import pytest

from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.runtime import DeploymentMismatch, build_runtime
from tests.fakes.llmapi_model import qwen3_folder
from tests.fakes.triton import FakeTriton


async def start(model: ServedModel, fake: FakeTriton) -> None:
    settings = Settings(models=[model], embedded=EmbeddedSettings(enabled=False))
    runtime = await build_runtime(settings, connect=lambda url: fake)  # type: ignore[arg-type,return-value]
    await runtime.aclose()


async def test_an_llmapi_model_without_a_tokenizer_folder_stops_the_start() -> None:
    model = ServedModel(id="m", family="qwen2_vl", triton_model="llmapi", triton_url="f:1")
    with pytest.raises(DeploymentMismatch, match="set tokenizer to the Hugging Face model folder"):
        await start(model, FakeTriton(url="f:1"))


async def test_no_family_on_the_engine_contract_stops_the_start() -> None:
    model = ServedModel(id="m", triton_model="ensemble", triton_url="f:1", tokenizer=qwen3_folder())
    with pytest.raises(DeploymentMismatch, match="is not NVIDIA's llmapi model"):
        await start(model, FakeTriton(url="f:1"))
