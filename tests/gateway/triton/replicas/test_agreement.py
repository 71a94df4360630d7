"""Replicas must declare the same model; the difference is named."""

from __future__ import annotations

import json
from typing import Any

from gateway.triton.contract import parse_model_config
from gateway.triton.replicas.agreement import difference, majority
from tests.fakes.triton_configs import default_configs


def ensemble() -> dict[str, Any]:
    config = next(c for c in default_configs() if c["name"] == "ensemble")
    return json.loads(json.dumps(config))


def test_the_same_config_agrees_and_a_changed_one_is_named() -> None:
    reference = parse_model_config(ensemble())
    assert difference(reference, parse_model_config(ensemble())) is None
    older = ensemble()
    older["input"] = [i for i in older["input"] if i["name"] != "prompt_table_extra_id"]
    assert difference(reference, parse_model_config(older)) == (
        "inputs differ: prompt_table_extra_id"
    )
    batch = ensemble()
    batch["max_batch_size"] = 1
    assert "max_batch_size 1" in str(difference(reference, parse_model_config(batch)))


def test_the_majority_config_is_the_reference() -> None:
    odd = ensemble()
    odd["input"] = odd["input"][:-1]
    contracts = {
        "a:1": parse_model_config(odd),
        "b:1": parse_model_config(ensemble()),
        "c:1": parse_model_config(ensemble()),
    }
    assert difference(majority(contracts), contracts["b:1"]) is None
