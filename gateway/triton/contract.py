"""What a served Triton model declares, read from its config at start-up.

TensorRT-LLM renamed inputs between releases (``min_length`` -> ``min_tokens``,
``random_seed`` -> ``seed``) and added new ones (``image_sizes_input``). Rather than pin a
version, the gateway reads each model's config and fills only the inputs it declares,
mapping its own neutral field names onto whichever spelling the model uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.errors import UpstreamUnavailable

# Triton config data types -> tritonclient wire dtypes.
WIRE_DTYPES = {
    "TYPE_STRING": "BYTES",
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_UINT64": "UINT64",
    "TYPE_FP16": "FP16",
    "TYPE_BF16": "BF16",
    "TYPE_FP32": "FP32",
}

# Neutral field -> the names TRT-LLM versions have used for it, newest first.
INPUT_ALIASES: dict[str, tuple[str, ...]] = {
    "seed": ("seed", "random_seed"),
    "min_tokens": ("min_tokens", "min_length"),
    # The encoder-decoder tensorrt_llm model spells its sampling inputs runtime_*.
    "top_k": ("top_k", "runtime_top_k"),
    "top_p": ("top_p", "runtime_top_p"),
}


# NVIDIA's llmapi ``tensorrt_llm`` Triton model (TensorRT-LLM's PyTorch backend; triton_backend/
# all_models/llmapi/tensorrt_llm/config.pbtxt @0a71057313ec0626527e164a8fc0205c5822e2f5): its
# inputs are ``text_input`` and ``sampling_param_*``, where the engine path has ``max_tokens``.
LLMAPI_INPUTS = ("text_input", "sampling_param_max_tokens")
Contract = Literal["engine", "llmapi"]


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str  # tritonclient wire dtype, e.g. "INT32"
    dims: tuple[int, ...]
    optional: bool


@dataclass(frozen=True)
class ModelContract:
    """The inputs, outputs and policies one Triton model declares."""

    name: str
    inputs: Mapping[str, TensorSpec]
    outputs: Mapping[str, TensorSpec]
    max_batch_size: int
    decoupled: bool
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> Contract:
        """Which contract this model speaks: NVIDIA's ``llmapi`` model (the PyTorch backend's
        ``text_input`` + ``sampling_param_*``, no ``max_tokens``) or the engine path's."""
        llmapi = all(name in self.inputs for name in LLMAPI_INPUTS)
        return "llmapi" if llmapi and "max_tokens" not in self.inputs else "engine"

    def input_name(self, field_name: str) -> str | None:
        """The declared spelling of a neutral field, or None if the model lacks it."""
        for candidate in INPUT_ALIASES.get(field_name, (field_name,)):
            if candidate in self.inputs:
                return candidate
        return None

    def declares(self, field_name: str) -> bool:
        return self.input_name(field_name) is not None

    def require(self, names: Sequence[str], what: str) -> None:
        """Refuse a deployment that lacks inputs the family cannot do without."""
        missing = [name for name in names if name not in self.inputs]
        if missing:
            raise UpstreamUnavailable(
                f"Triton model {self.name!r} does not declare {missing}: not {what}"
            )

    def int_parameter(self, key: str) -> int | None:
        value = self.parameters.get(key)
        try:
            return int(value) if value not in (None, "") else None
        except ValueError:
            return None


def _specs(entries: list[dict[str, Any]]) -> dict[str, TensorSpec]:
    specs: dict[str, TensorSpec] = {}
    for entry in entries:
        data_type = entry.get("data_type", "")
        specs[entry["name"]] = TensorSpec(
            name=entry["name"],
            datatype=WIRE_DTYPES.get(data_type, data_type.removeprefix("TYPE_")),
            dims=tuple(int(d) for d in entry.get("dims", [])),
            optional=bool(entry.get("optional", False)),
        )
    return specs


def parse_model_config(config: Mapping[str, Any]) -> ModelContract:
    """A ``ModelContract`` from ``get_model_config(..., as_json=True)["config"]``."""
    inputs = _specs(config.get("input", []))
    name = config.get("name", "?")
    policy = config.get("model_transaction_policy", {}) or {}
    parameters = {
        key: str(value.get("string_value", ""))
        for key, value in (config.get("parameters", {}) or {}).items()
    }
    return ModelContract(
        name=name,
        inputs=inputs,
        outputs=_specs(config.get("output", [])),
        max_batch_size=int(config.get("max_batch_size", 0)),
        decoupled=bool(policy.get("decoupled", False)),
        parameters=parameters,
    )
