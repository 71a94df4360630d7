"""Stand-ins for what a user brings: engine directories and NVIDIA's all_models templates.

Engine ``config.json`` files carry the fields trtllm-build and build_visual_engine.py write
(``pretrained_config.dtype``/``mapping``, ``build_config.max_prompt_embedding_table_size``,
``build_config.plugin_config.use_paged_context_fmha``, ``builder_config.model_type`` ...).
The templates are minimal configs shaped like NVIDIA's, with the real placeholder names in
the real positions: bare (``max_batch_size: ${triton_max_batch_size}``) and quoted.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any


def _param(key: str, value: str) -> str:
    return f'parameters: {{\n  key: "{key}"\n  value: {{\n    string_value: "{value}"\n  }}\n}}\n'


def _params(*keys: str) -> str:
    return "".join(_param(key, f"${{{key}}}") for key in keys)


def _tensor(name: str, dtype: str, dims: str, extra: str = "") -> str:
    return f'  {{\n    name: "{name}"\n    data_type: {dtype}\n    dims: [ {dims} ]\n{extra}  }}'


def _io(kind: str, *tensors: str) -> str:
    return f"{kind} [\n" + ",\n".join(tensors) + "\n]\n"


OPTIONAL = "    optional: true\n"
HEADER = 'name: "{name}"\nbackend: "{backend}"\nmax_batch_size: ${{triton_max_batch_size}}\n'
DECOUPLED = "model_transaction_policy {\n  decoupled: ${decoupled_mode}\n}\n"
DYNAMIC = (
    "dynamic_batching {\n    preferred_batch_size: [ ${triton_max_batch_size} ]\n"
    "    max_queue_delay_microseconds: ${max_queue_delay_microseconds}\n"
    "    default_queue_policy: { max_queue_size: ${max_queue_size} }\n}\n"
)
INSTANCES = "instance_group [\n  {{\n    count: {count}\n    kind: KIND_CPU\n  }}\n]\n"

# As tensorrt_llm and tensorrt_llm_bls declare them (NVIDIA's config.pbtxt @0c8de69a); the
# multimodal ensemble does not.
GUIDE_INPUTS = tuple(
    _tensor(name, "TYPE_STRING", "1", OPTIONAL + "    allow_ragged_batch: true\n")
    for name in ("guided_decoding_guide_type", "guided_decoding_guide")
)

TENSORRT_LLM = (
    HEADER.format(name="tensorrt_llm", backend="${triton_backend}")
    + DECOUPLED
    + DYNAMIC
    + _io(
        "input",
        _tensor("input_ids", "TYPE_INT32", "-1", OPTIONAL),
        _tensor(
            "encoder_input_features", "${encoder_input_features_data_type}", "-1, -1", OPTIONAL
        ),
        _tensor("input_lengths", "TYPE_INT32", "1"),
        _tensor(
            "prompt_embedding_table", "${prompt_embedding_table_data_type}", "-1, -1", OPTIONAL
        ),
        _tensor("prompt_table_extra_ids", "TYPE_UINT64", "-1", OPTIONAL),
        *GUIDE_INPUTS,
    )
    + _io(
        "output",
        _tensor("output_ids", "TYPE_INT32", "-1, -1"),
        _tensor("context_logits", "${logits_datatype}", "-1, -1"),
    )
    + INSTANCES.format(count=1)
    + _param("max_beam_width", "${max_beam_width}")
    + _param("gpt_model_type", "${batching_strategy}")
    + _param("gpt_model_path", "${engine_dir}")
    + _param("encoder_model_path", "${encoder_engine_dir}")
    + _params(
        "max_tokens_in_paged_kv_cache",
        "kv_cache_free_gpu_mem_fraction",
        "cross_kv_cache_fraction",
        "exclude_input_in_output",
        "enable_kv_cache_reuse",
        "normalize_log_probs",
        "enable_chunked_context",
        "gpu_device_ids",
        "tokenizer_dir",
        "guided_decoding_backend",
        "xgrammar_tokenizer_info_path",
    )
    + _param("executor_worker_path", "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker")
)

PREPROCESSING = (
    HEADER.format(name="preprocessing", backend="python")
    + DYNAMIC
    + _io(
        "input",
        _tensor("QUERY", "TYPE_STRING", "1"),
        _tensor("IMAGE_BYTES", "TYPE_UINT8", "-1, -1, -1, -1", OPTIONAL),
    )
    + _io("output", _tensor("INPUT_ID", "TYPE_INT32", "-1"))
    + _params("tokenizer_dir", "add_special_tokens", "multimodal_model_path")
    + _param("gpt_model_path", "${engine_dir}")
    + _params("max_num_images", "hf_model_path")
    + INSTANCES.format(count="${preprocessing_instance_count}")
)

POSTPROCESSING = (
    HEADER.format(name="postprocessing", backend="python")
    + _io("input", _tensor("TOKENS_BATCH", "TYPE_INT32", "-1, -1"))
    + _io("output", _tensor("OUTPUT", "TYPE_STRING", "-1"))
    + _params("tokenizer_dir", "skip_special_tokens")
    + INSTANCES.format(count="${postprocessing_instance_count}")
)

BLS = (
    HEADER.format(name="tensorrt_llm_bls", backend="python")
    + DECOUPLED
    + _io(
        "input",
        _tensor("text_input", "TYPE_STRING", "1"),
        _tensor("image_input", "TYPE_FP16", "-1, 3, -1, -1", OPTIONAL),
        *GUIDE_INPUTS,
    )
    + _io(
        "output",
        _tensor("text_output", "TYPE_STRING", "-1"),
        _tensor("context_logits", "${logits_datatype}", "-1, -1"),
    )
    + _params(
        "accumulate_tokens",
        "tensorrt_llm_model_name",
        "tensorrt_llm_draft_model_name",
        "multimodal_encoders_name",
    )
    + INSTANCES.format(count="${bls_instance_count}")
)

ENSEMBLE = (
    'name: "ensemble"\nplatform: "ensemble"\nmax_batch_size: ${triton_max_batch_size}\n'
    + _io(
        "input",
        _tensor("text_input", "TYPE_STRING", "1"),
        _tensor("image_bytes_input", "TYPE_UINT8", "-1, -1, -1, -1", OPTIONAL),
    )
    + _io(
        "output",
        _tensor("text_output", "TYPE_STRING", "-1"),
        _tensor("context_logits", "${logits_datatype}", "-1, -1"),
    )
    + "ensemble_scheduling {\n  step [\n"
    + '    {\n      model_name: "preprocessing"\n      model_version: -1\n'
    + '      input_map { key: "QUERY" value: "text_input" }\n'
    + '      output_map { key: "INPUT_ID" value: "_INPUT_ID" }\n    },\n'
    + '    {\n      model_name: "multimodal_encoders"\n      model_version: -1\n'
    + '      output_map { key: "OUT_PROMPT_EMBEDDING_TABLE" value: "table" },\n    },\n'
    + '    {\n      model_name: "tensorrt_llm"\n      model_version: -1\n'
    + '      input_map { key: "input_ids" value: "_INPUT_ID" }\n'
    + '      output_map { key: "output_ids" value: "_TOKENS" }\n    },\n'
    + '    {\n      model_name: "postprocessing"\n      model_version: -1\n'
    + '      input_map { key: "TOKENS_BATCH" value: "_TOKENS" }\n'
    + '      output_map { key: "OUTPUT" value: "text_output" }\n    }\n  ]\n}\n'
)

MULTIMODAL_ENCODERS = (
    HEADER.format(name="multimodal_encoders", backend="python")
    + DYNAMIC
    + _io("input", _tensor("pixel_values", "TYPE_FP16", "-1, -1, -1, -1", OPTIONAL))
    + "# NOTE: TYPE_BF16 is not supported by the python backend\n"
    + _io(
        "output",
        _tensor("OUT_PROMPT_EMBEDDING_TABLE", "${prompt_embedding_table_data_type}", "-1, -1"),
        _tensor("ENCODER_INPUT_FEATURES", "${encoder_input_features_data_type}", "-1, -1"),
    )
    + _params("visual_model_path", "hf_model_path")
    + INSTANCES.format(count=1)
)

WHISPER_BLS = (
    HEADER.format(name="whisper_bls", backend="python")
    + DECOUPLED
    + 'parameters [\n  {\n   key: "n_mels",\n'
    + '   value: {string_value:"${n_mels}"} # 128 for large-v3\n  },\n'
    + '  {\n  key: "engine_dir"\n  value: {string_value: "${engine_dir}"}\n  },\n'
    + '  {\n  key: "zero_pad"\n  value: {string_value: "${zero_pad}"}\n  }\n]\n'
    + _io(
        "input",
        _tensor("TEXT_PREFIX", "TYPE_STRING", "1"),
        _tensor("WAV", "TYPE_FP32", "-1"),
        _tensor("WAV_LENS", "TYPE_INT32", "1", "    optional: True\n"),
    )
    + _io("output", _tensor("TRANSCRIPTS", "TYPE_STRING", "1"))
    + "dynamic_batching {\n  }\n"
    + INSTANCES.format(count=8)
)

TEMPLATES = {
    "inflight_batcher_llm/tensorrt_llm": TENSORRT_LLM,
    "inflight_batcher_llm/preprocessing": PREPROCESSING,
    "inflight_batcher_llm/postprocessing": POSTPROCESSING,
    "inflight_batcher_llm/tensorrt_llm_bls": BLS,
    "inflight_batcher_llm/ensemble": ENSEMBLE.replace("multimodal_encoders", "tensorrt_llm"),
    "multimodal/ensemble": ENSEMBLE,
    "multimodal/multimodal_encoders": MULTIMODAL_ENCODERS,
    "whisper/whisper_bls": WHISPER_BLS,
}


def write_templates(backend_root: Path, overrides: dict[str, str] | None = None) -> Path:
    """A tensorrtllm_backend-shaped checkout: ``all_models/<group>/<model>/{config.pbtxt,1/}``."""
    for relative, text in {**TEMPLATES, **(overrides or {})}.items():
        model = backend_root / "all_models" / relative
        (model / "1").mkdir(parents=True, exist_ok=True)
        (model / "config.pbtxt").write_text(text)
        (model / "1" / "model.py").write_text("# the backend's model code would be here\n")
    return backend_root


PLUGIN = {
    "dtype": "float16",
    "gemm_plugin": "float16",
    "context_fmha": True,
    "paged_kv_cache": True,
    "use_paged_context_fmha": True,
    "tokens_per_block": 64,
}


def llm_config(**build: Any) -> dict[str, Any]:
    """An LLaVA-1.5 engine as trtllm-build writes it: batch 8, 8 x 576 multimodal budget."""
    config: dict[str, Any] = {
        "version": "0.19.0",
        "pretrained_config": {
            "architecture": "LlamaForCausalLM",
            "dtype": "float16",
            "vocab_size": 32064,
            "mapping": {"world_size": 1, "tp_size": 1, "pp_size": 1},
        },
        "build_config": {
            "max_input_len": 2048,
            "max_seq_len": 2560,
            "max_batch_size": 8,
            "max_beam_width": 1,
            "max_num_tokens": 8192,
            "max_prompt_embedding_table_size": 4608,
            "kv_cache_type": "PAGED",
            "plugin_config": dict(PLUGIN),
        },
    }
    for key, value in build.items():
        if key == "plugin_config":
            config["build_config"]["plugin_config"].update(value)
        else:
            config["build_config"][key] = value
    return config


def with_pretrained(config: dict[str, Any], **pretrained: Any) -> dict[str, Any]:
    updated = copy.deepcopy(config)
    updated["pretrained_config"].update(pretrained)
    return updated


def visual_config(model_type: str = "llava", max_batch_size: int = 8) -> dict[str, Any]:
    """build_visual_engine.py's config.json."""
    return {
        "builder_config": {
            "precision": "float16",
            "model_type": model_type,
            "strongly_typed": False,
            "max_batch_size": max_batch_size,
            "model_name": "multiModal",
            "output_shape": [max_batch_size, 576, 4096],
        }
    }


def mllama_config() -> dict[str, Any]:
    config = llm_config(max_prompt_embedding_table_size=0, max_encoder_input_len=6404)
    return with_pretrained(config, architecture="MLLaMAForCausalLM", dtype="bfloat16")


def whisper_configs() -> tuple[dict[str, Any], dict[str, Any]]:
    """(encoder, decoder) as the Whisper guide builds them (large-v3, batch 64)."""
    encoder = llm_config(max_batch_size=64, max_input_len=3000, max_seq_len=3000)
    encoder = with_pretrained(encoder, architecture="WhisperEncoder", n_mels=128)
    decoder = llm_config(max_batch_size=64, max_input_len=14, max_seq_len=114)
    decoder["build_config"]["max_encoder_input_len"] = 3000
    decoder["build_config"]["max_beam_width"] = 4
    return encoder, with_pretrained(decoder, architecture="DecoderModel")


def write_engine(directory: Path, config: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    (directory / "rank0.engine").write_bytes(b"")
    return directory
