"""Model configs of the fake Triton: what ``get_model_config(name, as_json=True)["config"]``
returns for the TensorRT-LLM multimodal ``ensemble`` (triton-contract.md section 2) and for
Whisper's encoder-decoder ``tensorrt_llm`` model (section 4).

Each is built as a ``ModelConfig`` protobuf and rendered exactly as tritonclient renders it (int64
dims come as strings). The names, dtypes and dims are copied from the gateway's own reference
models, ``server_repo/reference/*/config.pbtxt``; ``tests/fakes/test_triton.py`` holds them equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from google.protobuf.json_format import MessageToJson
from tritonclient.grpc import model_config_pb2, service_pb2

# (name, config data type, dims, optional): the ensemble's external inputs, in the order
# server_repo/reference/reference_llava/config.pbtxt declares them. "{image}" and "{video}" are
# filled per deployment; "{min_tokens}" and "{seed}" with the release's spelling.
_ENSEMBLE_INPUTS: tuple[tuple[str, str, tuple[int, ...], bool], ...] = (
    ("text_input", "TYPE_STRING", (1,), False),
    ("max_tokens", "TYPE_INT32", (1,), False),
    ("{image}", "", (-1, -1, -1, -1), True),
    ("{video}", "TYPE_UINT8", (-1, -1, -1, -1), True),
    ("bad_words", "TYPE_STRING", (-1,), True),
    ("stop_words", "TYPE_STRING", (-1,), True),
    ("end_id", "TYPE_INT32", (1,), True),
    ("pad_id", "TYPE_INT32", (1,), True),
    ("top_k", "TYPE_INT32", (1,), True),
    ("top_p", "TYPE_FP32", (1,), True),
    ("temperature", "TYPE_FP32", (1,), True),
    ("repetition_penalty", "TYPE_FP32", (1,), True),
    ("presence_penalty", "TYPE_FP32", (1,), True),
    ("frequency_penalty", "TYPE_FP32", (1,), True),
    ("length_penalty", "TYPE_FP32", (1,), True),
    ("{min_tokens}", "TYPE_INT32", (1,), True),
    ("{seed}", "TYPE_UINT64", (1,), True),
    ("beam_width", "TYPE_INT32", (1,), True),
    ("stream", "TYPE_BOOL", (1,), True),
    ("prompt_table_extra_id", "TYPE_UINT64", (1,), True),
    ("return_num_input_tokens", "TYPE_BOOL", (1,), True),
    ("return_num_output_tokens", "TYPE_BOOL", (1,), True),
    ("return_perf_metrics", "TYPE_BOOL", (1,), True),
    ("return_log_probs", "TYPE_BOOL", (1,), True),
    ("return_generation_logits", "TYPE_BOOL", (1,), True),
    ("guided_decoding_guide_type", "TYPE_STRING", (1,), True),
    ("guided_decoding_guide", "TYPE_STRING", (1,), True),
)
_ENSEMBLE_OUTPUTS = (
    ("text_output", "TYPE_STRING", (-1,)),
    ("num_input_tokens", "TYPE_INT32", (1,)),
    ("num_output_tokens", "TYPE_INT32", (1,)),
    ("kv_cache_reused_blocks", "TYPE_INT32", (1,)),
    ("kv_cache_alloc_new_blocks", "TYPE_INT32", (1,)),
    ("kv_cache_alloc_total_blocks", "TYPE_INT32", (1,)),
    ("cum_log_probs", "TYPE_FP32", (-1,)),
    ("output_log_probs", "TYPE_FP32", (-1, -1)),
    ("generation_logits", "TYPE_FP32", (-1, -1, -1)),
)
# What ``log_probs=False`` leaves out (triton-contract.md section 8).
_LOG_PROB_TENSORS = frozenset(
    {"return_log_probs", "return_generation_logits", "cum_log_probs", "output_log_probs",
     "generation_logits"}
)  # fmt: skip
_IMAGE_TYPES = {"image_input": "TYPE_FP16", "image_bytes_input": "TYPE_UINT8"}
# Guided decoding (triton-contract.md section 9): declared by tensorrt_llm, the BLS and the
# reference models, not by NVIDIA's multimodal ensemble unless mmgw trtllm-repo wired them.
_GUIDE_TENSORS = frozenset({"guided_decoding_guide_type", "guided_decoding_guide"})
# TensorRT-LLM's two spellings: tensorrtllm_backend v0.19 and later main.
SPELLINGS = {
    "v0.19": {"min_tokens": "min_length", "seed": "random_seed"},
    "current": {"min_tokens": "min_tokens", "seed": "seed"},
}
# server_repo/reference/reference_whisper/config.pbtxt.
_WHISPER_INPUTS: tuple[tuple[str, str, tuple[int, ...], bool], ...] = (
    ("encoder_input_features", "TYPE_FP16", (-1, -1), True),
    ("encoder_output_lengths", "TYPE_INT32", (1,), True),
    ("input_lengths", "TYPE_INT32", (1,), False),
    ("request_output_len", "TYPE_INT32", (1,), False),
    ("decoder_input_ids", "TYPE_INT32", (-1,), True),
    ("end_id", "TYPE_INT32", (1,), True),
    ("pad_id", "TYPE_INT32", (1,), True),
    ("beam_width", "TYPE_INT32", (1,), True),
    ("temperature", "TYPE_FP32", (1,), True),
    ("runtime_top_k", "TYPE_INT32", (1,), True),
    ("runtime_top_p", "TYPE_FP32", (1,), True),
    ("seed", "TYPE_UINT64", (1,), True),
    ("exclude_input_in_output", "TYPE_BOOL", (1,), True),
    ("streaming", "TYPE_BOOL", (1,), True),
)
_WHISPER_OUTPUTS = (
    ("output_ids", "TYPE_INT32", (-1, -1)),
    ("sequence_length", "TYPE_INT32", (-1,)),
)
WHISPER_FRAMES = 3000  # the encoder's input: 30 s of 10 ms mel frames
WHISPER_MELS = 80
WHISPER_LANGUAGES = 99  # the reference Whisper's vocabulary: bytes, then 99 languages' specials


def _model_config(
    name: str,
    inputs: Iterable[tuple[str, str, tuple[int, ...], bool]],
    outputs: Iterable[tuple[str, str, tuple[int, ...]]],
    *,
    decoupled: bool,
    parameters: dict[str, str],
    max_batch_size: int = 8,
) -> dict[str, Any]:
    """``get_model_config(name, as_json=True)["config"]``, rendered as tritonclient does."""
    config = model_config_pb2.ModelConfig(
        name=name, backend="python", max_batch_size=max_batch_size
    )
    config.model_transaction_policy.decoupled = decoupled
    for input_name, data_type, dims, optional in inputs:
        config.input.add(
            name=input_name,
            data_type=model_config_pb2.DataType.Value(data_type),
            dims=dims,
            optional=optional,
        )
    for output_name, data_type, dims in outputs:
        config.output.add(
            name=output_name, data_type=model_config_pb2.DataType.Value(data_type), dims=dims
        )
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    response = service_pb2.ModelConfigResponse(config=config)
    return json.loads(MessageToJson(response, preserving_proto_field_name=True))["config"]


def ensemble_config(
    name: str,
    *,
    image: str | None = "image_input",
    video: bool = False,
    spelling: str = "v0.19",
    decoupled: bool = True,
    tokens_per_block: int = 16,
    only: Sequence[str] | None = None,
    log_probs: bool = True,
    guided: bool = True,
    max_seq_len: int | None = None,
) -> dict[str, Any]:
    """A multimodal ``ensemble`` (triton-contract.md section 2).

    ``image``: ``image_input`` (FP16 pixels: LLaVA, BLIP-2, VILA), ``image_bytes_input`` (UINT8
    pixels: LLaVA-OneVision, Mllama, Qwen2-VL) or None; ``video`` adds ``video_bytes_input``;
    ``spelling`` picks v0.19's or current input names; ``only`` keeps just those inputs (a
    deployment built from an older or trimmed template); ``log_probs`` False leaves out the
    log-prob and generation-logits tensors (the benchmark's load generator has none);
    ``guided`` False leaves out the guided-decoding inputs (NVIDIA's multimodal ensemble as
    shipped, and the load generator); ``max_seq_len`` the engine's prompt + output limit as a
    deployment may declare it (a model parameter).
    """
    names = {"image": image, "video": "video_bytes_input" if video else None, **SPELLINGS[spelling]}
    inputs = []
    for input_name, data_type, dims, optional in _ENSEMBLE_INPUTS:
        if input_name.startswith("{"):
            key = input_name[1:-1]
            resolved = names[key]
            if resolved is None:
                continue
            data_type = data_type or _IMAGE_TYPES[resolved]
            input_name = resolved
        if not log_probs and input_name in _LOG_PROB_TENSORS:
            continue
        if not guided and input_name in _GUIDE_TENSORS:
            continue
        if only is None or input_name in only:
            inputs.append((input_name, data_type, dims, optional))
    outputs = [o for o in _ENSEMBLE_OUTPUTS if log_probs or o[0] not in _LOG_PROB_TENSORS]
    return _model_config(
        name,
        inputs,
        outputs,
        decoupled=decoupled,
        parameters={
            "tokens_per_block": str(tokens_per_block),
            **({"max_seq_len": str(max_seq_len)} if max_seq_len else {}),
        },
    )


def whisper_direct_config(
    name: str, *, max_input_len: int = 64, max_seq_len: int = 192, decoupled: bool = True
) -> dict[str, Any]:
    """Whisper's encoder-decoder ``tensorrt_llm`` model (triton-contract.md section 4); the
    limits stand for the decoder engine's ``max_input_len`` and ``max_seq_len``."""
    return _model_config(
        name,
        _WHISPER_INPUTS,
        _WHISPER_OUTPUTS,
        decoupled=decoupled,
        parameters={"max_input_len": str(max_input_len), "max_seq_len": str(max_seq_len)},
    )


_MINIMAL = ("text_input", "max_tokens", "stream")


REPOSITORY = Path(__file__).resolve().parents[2] / "server_repo"
LLMAPI_REFERENCE = REPOSITORY / "reference/reference_qwen2_5_vl/config.pbtxt"


def llmapi_config(name: str, decoupled: bool = True, without: Sequence[str] = ()) -> dict[str, Any]:
    """NVIDIA's llmapi ``tensorrt_llm`` model as the reference declares it (its config.pbtxt,
    itself NVIDIA's at TensorRT-LLM 0a71057313ec0626527e164a8fc0205c5822e2f5), read as Triton
    shows it; ``without``: inputs a trimmed deployment leaves out."""
    config = text_format.Parse(LLMAPI_REFERENCE.read_text(), model_config_pb2.ModelConfig())
    config.name = name
    config.model_transaction_policy.decoupled = decoupled
    kept = [entry for entry in config.input if entry.name not in without]
    del config.input[:]
    config.input.extend(kept)
    rendered: dict[str, Any] = json.loads(MessageToJson(config, preserving_proto_field_name=True))
    return rendered


def default_configs() -> list[dict[str, Any]]:
    """The fake's repository: the three contracts the gateway's reference models speak, a
    BLIP-2 ensemble, a LLaVA-OneVision ensemble without the guided decoding inputs (NVIDIA's
    multimodal ensemble as shipped), and two trimmed deployments (the required inputs and
    ``stream`` only; one not decoupled)."""
    return [
        ensemble_config("ensemble", image="image_input", spelling="v0.19"),
        ensemble_config(
            "ensemble_onevision", image="image_bytes_input", video=True, spelling="current"
        ),
        ensemble_config("ensemble_blip2", image="image_input", spelling="current"),
        ensemble_config("ensemble_unguided", image="image_bytes_input", guided=False),
        ensemble_config("ensemble_minimal", image=None, only=_MINIMAL, max_seq_len=2048),
        ensemble_config("ensemble_unary", image=None, decoupled=False, only=_MINIMAL),
        whisper_direct_config("whisper"),
        llmapi_config("llmapi"),
        llmapi_config("llmapi_unary", decoupled=False, without=("image_url",)),
    ]
