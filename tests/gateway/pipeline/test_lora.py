"""LoRA: which adapter a request gets, the .npy files as the wire wants them, and the
ledger that sends an adapter's weights once per Triton model (again after a failure)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.config import ServedModel
from gateway.errors import InvalidRequest, UpstreamFailed
from gateway.families.calls import GenerationRequest, Plan
from gateway.families.events import Done
from gateway.families.registry import get_family
from gateway.pipeline.lora import (
    LoraChoice,
    choose_adapter,
    load_adapter,
    lora_choice,
)
from gateway.pipeline.relay import Prepared, prepared, relay
from gateway.runtime import ServedRuntime
from gateway.triton.contract import parse_model_config
from gateway.triton.lora import LoraLedger
from tests.fakes.triton_wire import infer_response


def write_adapter(folder: Path, modules: int = 4, size: int = 8, batch_axis: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    weights = np.arange(modules * size, dtype=np.float32).reshape(modules, size)
    config = np.tile(np.array([[1, 0, 8]], dtype=np.int64), (modules, 1))
    if batch_axis:  # hf_lora_convert.py writes [1, n, ...]
        weights, config = weights[np.newaxis], config[np.newaxis]
    np.save(folder / "model.lora_weights.npy", weights)
    np.save(folder / "model.lora_config.npy", config)


def served_model(tmp_path: Path, *task_ids: int) -> ServedModel:
    adapters = [{"task_id": t, "weights_path": str(tmp_path / str(t))} for t in task_ids]
    for task_id in task_ids:
        write_adapter(tmp_path / str(task_id))
    return ServedModel(
        id="xc2", family="internlm_xcomposer2", triton_model="t", triton_url="x:1", lora=adapters
    )


def test_one_table_or_a_list_configures_adapters(tmp_path: Path) -> None:
    one = ServedModel(
        id="m",
        family="internlm_xcomposer2",
        triton_model="t",
        lora={"task_id": 3, "weights_path": str(tmp_path)},
    )
    assert [a.task_id for a in one.lora] == [3]
    with pytest.raises(ValueError, match="duplicate LoRA task ids"):
        served_model(tmp_path, 1, 1)


def test_the_first_adapter_applies_unless_the_request_names_one(tmp_path: Path) -> None:
    served = served_model(tmp_path, 1, 2)
    assert choose_adapter(served, None).task_id == 1  # type: ignore[union-attr]
    assert choose_adapter(served, 2).task_id == 2  # type: ignore[union-attr]
    with pytest.raises(InvalidRequest, match=r"its adapters: \[1, 2\]") as info:
        choose_adapter(served, 9)
    assert info.value.param == "lora_task_id" and info.value.status_code == 400


def test_a_model_without_adapters_refuses_a_task_id() -> None:
    plain = ServedModel(id="p", family="llava", triton_model="t")
    assert choose_adapter(plain, None) is None
    with pytest.raises(InvalidRequest, match="without LoRA adapters"):
        choose_adapter(plain, 1)


@pytest.mark.parametrize("batch_axis", [True, False])
def test_adapter_files_become_fp16_and_int32_with_a_batch_axis(
    tmp_path: Path, batch_axis: bool
) -> None:
    write_adapter(tmp_path, modules=4, size=8, batch_axis=batch_axis)
    weights, config = load_adapter(tmp_path)
    assert weights.shape == (1, 4, 8) and weights.dtype == np.float16
    assert config.shape == (1, 4, 3) and config.dtype == np.int32


def test_malformed_adapter_files_are_named(tmp_path: Path) -> None:
    np.save(tmp_path / "model.lora_weights.npy", np.zeros((1, 4, 8), np.float16))
    np.save(tmp_path / "model.lora_config.npy", np.zeros((1, 3, 3), np.int32))
    with pytest.raises(ValueError, match="disagree on modules"):
        load_adapter(tmp_path)


async def test_weights_travel_until_the_server_has_them(tmp_path: Path) -> None:
    served = served_model(tmp_path, 7)
    ledger = LoraLedger()
    first = await lora_choice(served, ledger, None)
    assert first is not None and first.task_id == 7 and first.weights is not None
    ledger.delivered_ok(7)
    later = await lora_choice(served, ledger, 7)
    assert later is not None and later.weights is None and later.config is None
    ledger.forget(7)
    again = await lora_choice(served, ledger, 7)
    assert again is not None and again.weights is not None


class FakeClient:
    url = "x:1"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def stream(
        self, model: str, inputs: list, request_id: str, outputs: tuple = (), route: Any = None
    ) -> AsyncIterator:
        if self.fail:
            raise UpstreamFailed("LoRA task 7 not found in cache")
        yield infer_response(text_output=np.array([[b"ok"]], dtype=np.object_))


def prepared_with(client: FakeClient, tmp_path: Path, weights: bool) -> Prepared:
    config = served_model(tmp_path, 7)
    contract = parse_model_config(
        {
            "name": "t",
            "input": [
                {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
                {"name": "max_tokens", "data_type": "TYPE_INT32", "dims": [1]},
                {"name": "lora_task_id", "data_type": "TYPE_UINT64", "dims": [1]},
                {"name": "lora_weights", "data_type": "TYPE_FP16", "dims": [-1, -1]},
                {"name": "lora_config", "data_type": "TYPE_INT32", "dims": [-1, 3]},
            ],
        }
    )
    served = ServedRuntime(config, get_family("internlm_xcomposer2"), client)  # type: ignore[arg-type]
    choice = LoraChoice(7, *(load_adapter(tmp_path / "7") if weights else (None, None)))
    generation = GenerationRequest(
        "hi", 4, lora_task_id=7, lora_weights=choice.weights, lora_config=choice.config
    )
    return prepared(served, contract, Plan((generation,)), (), 1, choice)


async def test_relay_records_delivery_and_forgets_after_an_id_only_failure(
    tmp_path: Path,
) -> None:
    first = prepared_with(FakeClient(), tmp_path, weights=True)
    items = [item async for item in relay(first, "r1")]
    assert isinstance(items[-1], Done)
    assert not first.served.lora.needs_weights(7)

    failing = prepared_with(FakeClient(fail=True), tmp_path, weights=False)
    failing.served.lora.delivered_ok(7)
    with pytest.raises(UpstreamFailed):
        _ = [item async for item in relay(failing, "r2")]
    assert failing.served.lora.needs_weights(7)
