"""NVIDIA's llmapi ``tensorrt_llm`` model config, as a table the tests compare against.

The reference model's config and the repository ``mmgw trtllm-repo --backend llmapi`` copies
must both carry these names, dtypes, dims and optional flags. ``nvidia_config_text`` renders a
stand-in of NVIDIA's file (as a TensorRT-LLM checkout holds it: no max_batch_size, no
transaction policy, both left to model.yaml) for tests that need a checkout.
"""

from __future__ import annotations

from pathlib import Path

# NVIDIA/TensorRT-LLM triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt at commit
# 0a71057313ec0626527e164a8fc0205c5822e2f5: (name, data_type, dims, optional).
NVIDIA_INPUTS = [
    ("text_input", "TYPE_STRING", ["-1"], False),
    ("image_url", "TYPE_STRING", ["-1"], True),
    ("streaming", "TYPE_BOOL", ["1"], True),
    ("sampling_param_best_of", "TYPE_INT32", ["1"], True),
    ("sampling_param_temperature", "TYPE_FP32", ["1"], True),
    ("sampling_param_top_k", "TYPE_INT32", ["1"], True),
    ("sampling_param_top_p", "TYPE_FP32", ["1"], True),
    ("sampling_param_frequency_penalty", "TYPE_FP32", ["1"], True),
    ("sampling_param_presence_penalty", "TYPE_FP32", ["1"], True),
    ("sampling_param_max_tokens", "TYPE_INT32", ["1"], True),
    ("sampling_param_stop", "TYPE_STRING", ["-1"], True),
    ("sampling_param_seed", "TYPE_UINT64", ["1"], True),
    ("sampling_param_exclude_input_from_output", "TYPE_BOOL", ["1"], True),
    ("sampling_param_return_perf_metrics", "TYPE_BOOL", ["1"], True),
    ("return_finish_reason", "TYPE_BOOL", ["1"], True),
    ("return_stop_reason", "TYPE_BOOL", ["1"], True),
    ("return_cumulative_logprob", "TYPE_BOOL", ["1"], True),
    ("stop", "TYPE_BOOL", ["1"], True),
    ("lora_id", "TYPE_UINT64", ["1"], True),
    ("lora_name", "TYPE_STRING", ["1"], True),
    ("lora_path", "TYPE_STRING", ["1"], True),
    ("lora_ckpt_source", "TYPE_STRING", ["1"], True),
]
NVIDIA_OUTPUTS = [
    ("text_output", "TYPE_STRING", ["-1"]),
    ("finish_reason", "TYPE_STRING", ["-1"]),
    ("stop_reason", "TYPE_STRING", ["-1"]),
    ("cumulative_logprob", "TYPE_FP32", ["-1"]),
    ("kv_cache_reused_block", "TYPE_INT32", ["-1"]),
    ("kv_cache_missed_block", "TYPE_INT32", ["-1"]),
    ("kv_cache_alloc_new_blocks", "TYPE_INT32", ["-1"]),
    ("kv_cache_alloc_total_blocks", "TYPE_INT32", ["-1"]),
    ("kv_cache_hit_rate", "TYPE_FP32", ["-1"]),
    ("arrival_time_ns", "TYPE_INT64", ["1"]),
    ("first_scheduled_time_ns", "TYPE_INT64", ["1"]),
    ("first_token_time_ns", "TYPE_INT64", ["1"]),
    ("last_token_time_ns", "TYPE_INT64", ["1"]),
    ("acceptance_rate", "TYPE_FP32", ["1"]),
    ("total_accepted_draft_tokens", "TYPE_INT32", ["1"]),
    ("total_draft_tokens", "TYPE_INT32", ["1"]),
]

#: NVIDIA's 1/model.yaml defaults (the same file): a text model, not decoupled.
NVIDIA_MODEL_YAML = """model: TinyLlama/TinyLlama-1.1B-Chat-v1.0
backend: "pytorch"
tensor_parallel_size: 1
pipeline_parallel_size: 1
triton_config:
  max_batch_size: 0
  decoupled: False
"""


def _block(name: str, dtype: str, dims: list[str], optional: bool) -> str:
    flag = "    optional: true\n" if optional else ""
    shape = ", ".join(dims)
    return f'  {{\n    name: "{name}"\n    data_type: {dtype}\n    dims: [ {shape} ]\n{flag}  }}'


def nvidia_config_text(image_url: bool = True, header: str = "") -> str:
    """An NVIDIA-shaped config.pbtxt (``image_url`` only from PR #18381 on)."""
    inputs = [i for i in NVIDIA_INPUTS if image_url or i[0] != "image_url"]
    text = 'name: "tensorrt_llm"\nbackend: "python"\n' + header
    text += "instance_group [\n  {\n    count: 1\n    kind : KIND_CPU\n  }\n]\n"
    text += "input [\n" + ",\n".join(_block(*item) for item in inputs) + "\n]\n"
    outputs = ",\n".join(_block(name, dtype, dims, False) for name, dtype, dims in NVIDIA_OUTPUTS)
    return text + "output [\n" + outputs + "\n]\n"


def write_llmapi_checkout(root: Path, image_url: bool = True, header: str = "") -> Path:
    """A TensorRT-LLM checkout holding triton_backend/all_models/llmapi/tensorrt_llm/."""
    model = root / "triton_backend" / "all_models" / "llmapi" / "tensorrt_llm"
    (model / "1").mkdir(parents=True, exist_ok=True)
    (model / "config.pbtxt").write_text(nvidia_config_text(image_url, header))
    (model / "1" / "model.py").write_text("# NVIDIA's model.py would be here\n")
    (model / "1" / "helpers.py").write_text("# NVIDIA's helpers.py would be here\n")
    (model / "1" / "model.yaml").write_text(NVIDIA_MODEL_YAML)
    return root
