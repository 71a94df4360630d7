"""The ``${...}`` values for every model of the repository, derived once from the request.

Values are per model because the same placeholder means different things in different
templates (``engine_dir`` is the LLM engine for ``preprocessing`` and ``tensorrt_llm`` but
the Whisper encoder for ``whisper_bls``). Placeholders are filled under both their old and
new names (``visual_model_path`` became ``multimodal_model_path``), so templates from
either side of the rename work. Placeholders nobody sets here stay as NVIDIA leaves them:
inside quoted parameters, which the backend reads as "unset, use the default".
"""

from __future__ import annotations

from server_repo.trtllm.engines import Engines
from server_repo.trtllm.request import RepoRequest

Values = dict[str, str]

#: Preprocessing and the vision encoder batch for a moment, as NVIDIA's guide configures.
ENCODER_QUEUE_DELAY_US = 20000


def flag(value: bool) -> str:
    """Booleans as NVIDIA's guides spell them (read by both protobuf and the backends)."""
    return "True" if value else "False"


def _common(request: RepoRequest, batch: int) -> Values:
    return {
        "triton_max_batch_size": str(batch),
        "max_queue_size": "0",
        "max_queue_delay_microseconds": "0",
        "logits_datatype": "TYPE_FP32",
        "prompt_embedding_table_data_type": "TYPE_FP16",
        "encoder_input_features_data_type": request.spec.encoder_features_type,
        "decoupled_mode": flag(request.streaming),
    }


def _tensorrt_llm(request: RepoRequest, engines: Engines, batch: int) -> Values:
    values = _common(request, batch) | {
        "triton_backend": "tensorrtllm",
        "max_beam_width": "1",
        "engine_dir": request.server_path(engines.llm.path),
        "batching_strategy": "inflight_fused_batching",
        "kv_cache_free_gpu_mem_fraction": str(request.kv_cache_fraction),
        "enable_kv_cache_reuse": flag(request.kv_cache_reuse),
        "enable_chunked_context": "False",
        "exclude_input_in_output": "True",
        # OpenAI's logprobs are the model's own: TensorRT-LLM's default (true) renormalises
        # over the top-k, so every greedy token would report 0 (docs/triton-contract.md s. 8).
        "normalize_log_probs": "False",
    }
    if request.cross_fraction is not None:
        values["cross_kv_cache_fraction"] = str(request.cross_fraction)
    if engines.encoder is not None:
        values["encoder_engine_dir"] = request.server_path(engines.encoder.path)
    if request.guided_decoding and request.tokenizer_dir is not None:
        values["guided_decoding_backend"] = "xgrammar"
        values["xgrammar_tokenizer_info_path"] = request.server_path(request.tokenizer_info_path)
        values["tokenizer_dir"] = request.server_path(request.tokenizer_dir)  # Python backend
    return values


def _multimodal(request: RepoRequest, engines: Engines, batch: int) -> dict[str, Values]:
    assert engines.visual is not None and request.tokenizer_dir is not None
    common = _common(request, batch)
    tokenizer = request.server_path(request.tokenizer_dir)
    visual = request.server_path(engines.visual.path)
    encoder_side = common | {
        "max_queue_delay_microseconds": str(ENCODER_QUEUE_DELAY_US),
        "visual_model_path": visual,
        "multimodal_model_path": visual,
        "hf_model_path": tokenizer,
    }
    return {
        "tensorrt_llm": _tensorrt_llm(request, engines, batch),
        "preprocessing": encoder_side
        | {
            "tokenizer_dir": tokenizer,
            "preprocessing_instance_count": "1",
            "engine_dir": request.server_path(engines.llm.path),
            "max_num_images": str(request.max_images),
        },
        "multimodal_encoders": encoder_side,
        "postprocessing": common
        | {"tokenizer_dir": tokenizer, "postprocessing_instance_count": "1"},
        "ensemble": common,
        "tensorrt_llm_bls": common
        | {
            "bls_instance_count": "1",
            "accumulate_tokens": "False",
            "tensorrt_llm_model_name": "tensorrt_llm",
            "multimodal_encoders_name": "multimodal_encoders",
        },
    }


def _whisper(request: RepoRequest, engines: Engines, batch: int) -> dict[str, Values]:
    assert engines.encoder is not None
    return {
        "tensorrt_llm": _tensorrt_llm(request, engines, batch),
        "whisper_bls": _common(request, batch)
        | {
            "engine_dir": request.server_path(engines.encoder.path),
            "n_mels": str(engines.encoder.n_mels),
            "zero_pad": "False",
        },
    }


def model_values(request: RepoRequest, engines: Engines) -> dict[str, Values]:
    """Triton model name -> placeholder values for its ``config.pbtxt``."""
    batch = request.max_batch_size or engines.llm.max_batch_size
    if request.spec.layout == "whisper":
        return _whisper(request, engines, batch)
    return _multimodal(request, engines, batch)
