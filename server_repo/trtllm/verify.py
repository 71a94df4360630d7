"""Re-read every written ``config.pbtxt`` as Triton's ``ModelConfig`` and check the values.

Filling text can silently miss: a template may hard-code a value, drop a parameter, or
spell a key differently from the release this tool was written against. So after filling,
each config is parsed with the protobuf types ``tritonclient`` ships and the values that
must agree (batch size, decoupled policy, engine paths, dtypes, reuse, prompt exclusion)
are read back. A config that would load but behave wrongly is refused here.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from server_repo.trtllm.errors import TemplateError
from server_repo.trtllm.request import RepoRequest
from server_repo.trtllm.values import Values

DataType = model_config_pb2.DataType


def parse_config(path: Path) -> model_config_pb2.ModelConfig:
    """``path`` as a ``ModelConfig``; a parse error names the file and the line."""
    try:
        return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise TemplateError(f"{path}: not a valid Triton model config: {exc}") from exc


def _param(config: model_config_pb2.ModelConfig, key: str, where: Path) -> str:
    if key not in config.parameters:
        raise TemplateError(f"{where}: the template has no parameter {key!r}; it is required")
    return str(config.parameters[key].string_value)


def _expect(where: Path, what: str, found: object, wanted: object) -> None:
    if found != wanted:
        raise TemplateError(f"{where}: {what} is {found!r} after filling, expected {wanted!r}")


#: Parameters whose written value must be exactly the value computed for them.
PINNED_PARAMETERS: dict[str, dict[str, str]] = {
    "tensorrt_llm": {
        "gpt_model_path": "engine_dir",
        "exclude_input_in_output": "exclude_input_in_output",
        "enable_kv_cache_reuse": "enable_kv_cache_reuse",
        "kv_cache_free_gpu_mem_fraction": "kv_cache_free_gpu_mem_fraction",
    },
    "preprocessing": {"tokenizer_dir": "tokenizer_dir"},
    "postprocessing": {"tokenizer_dir": "tokenizer_dir"},
    "whisper_bls": {"engine_dir": "engine_dir", "n_mels": "n_mels"},
}
#: Optional pins: checked when the value was computed (enc-dec families, Whisper).
OPTIONAL_PINS = {"cross_kv_cache_fraction": "cross_kv_cache_fraction"}
DECOUPLED_MODELS = ("tensorrt_llm", "tensorrt_llm_bls", "whisper_bls")


def _check_model(name: str, path: Path, values: Values, streaming: bool) -> None:
    config = parse_config(path)
    _expect(path, "name", config.name, name)
    _expect(path, "max_batch_size", str(config.max_batch_size), values["triton_max_batch_size"])
    if name in DECOUPLED_MODELS:
        decoupled = config.model_transaction_policy.decoupled
        _expect(path, "model_transaction_policy.decoupled", decoupled, streaming)
    for key, value_name in PINNED_PARAMETERS.get(name, {}).items():
        _expect(path, f"parameter {key}", _param(config, key, path), values[value_name])
    if name == "tensorrt_llm":
        for key, value_name in OPTIONAL_PINS.items():
            if value_name in values:
                _expect(path, f"parameter {key}", _param(config, key, path), values[value_name])
    _check_encoder_features(name, path, config, values)


#: Tensors whose dtype must be the family's encoder-features type: (model, side, tensor).
ENCODER_FEATURE_TENSORS = {
    "tensorrt_llm": ("input", "encoder_input_features"),
    "multimodal_encoders": ("output", "ENCODER_INPUT_FEATURES"),
}


def _check_encoder_features(
    name: str, path: Path, config: model_config_pb2.ModelConfig, values: Values
) -> None:
    """The vision encoder's output and the LLM's input must both carry the family dtype."""
    if name not in ENCODER_FEATURE_TENSORS:
        return
    side, tensor = ENCODER_FEATURE_TENSORS[name]
    wanted = values["encoder_input_features_data_type"]
    for entry in getattr(config, side):
        if entry.name == tensor:
            _expect(path, f"{tensor} data_type", DataType.Name(entry.data_type), wanted)
    if name == "multimodal_encoders" and not (
        "visual_model_path" in config.parameters or "multimodal_model_path" in config.parameters
    ):
        raise TemplateError(f"{path}: no visual_model_path/multimodal_model_path parameter")


def _check_ensemble(repo: Path) -> None:
    path = repo / "ensemble" / "config.pbtxt"
    if not path.is_file():
        return
    config = parse_config(path)
    for step in config.ensemble_scheduling.step:
        if not (repo / step.model_name / "config.pbtxt").is_file():
            raise TemplateError(f"{path}: step model {step.model_name!r} is not in the repository")


def verify_repository(repo: Path, values: dict[str, Values], request: RepoRequest) -> list[str]:
    """Parse every model config under ``repo`` and check the values that must agree; notes
    for the user come back (a BLS that cannot carry what was asked for)."""
    for name, model_values in values.items():
        _check_model(name, repo / name / "config.pbtxt", model_values, request.streaming)
    _check_ensemble(repo)
    if not request.guided_decoding:
        return []
    from server_repo.trtllm.guided import check_repository  # it reads configs with this module

    info = Path(values["tensorrt_llm"]["xgrammar_tokenizer_info_path"])
    return check_repository(repo, request.entry, info)
