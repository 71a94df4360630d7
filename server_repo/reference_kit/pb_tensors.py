"""Triton request tensors <-> the kit's request and statistics, with numpy in between.

Everything here is pure numpy except ``read_inputs`` and ``to_pb_tensors``, which only touch the
duck-typed Python-backend objects (``request.inputs()``, ``pb_utils.Tensor``), so the parsing is
testable without a Triton stub. Every input carries the batch dimension in front (the models
declare ``max_batch_size: 8``): a dims-[1] scalar arrives as shape ``[1, 1]``, ``stop_words`` as
``[1, n]``, ``image_input`` as ``[1, n, 3, H, W]``. Batch 1 per request, as the contract says.

Input names differ across tensorrtllm_backend versions (``min_length``/``random_seed`` up to
v0.19/v1.0, ``min_tokens``/``seed`` later): ``InputNames.from_config`` reads which ones a model
declares, so one parser serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from server_repo.reference_kit.request import (
    GUIDE_TYPES,
    GenerationRequest,
    GenerationStats,
    InvalidRequest,
    Step,
)


@dataclass(frozen=True)
class InputNames:
    """The version-dependent input names a model declares."""

    min_tokens: str = "min_tokens"
    seed: str = "seed"

    @classmethod
    def from_config(cls, declared: Iterable[str]) -> InputNames:
        names = set(declared)
        return cls(
            min_tokens="min_length" if "min_length" in names else "min_tokens",
            seed="random_seed" if "random_seed" in names else "seed",
        )


@dataclass(frozen=True)
class ReturnFlags:
    """Response options: streaming and which optional outputs to attach."""

    stream: bool = False
    num_input_tokens: bool = False
    num_output_tokens: bool = False
    perf_metrics: bool = False
    log_probs: bool = False
    generation_logits: bool = False


def read_inputs(request: Any) -> dict[str, np.ndarray]:
    """All input tensors of a Python-backend request as numpy arrays, by name."""
    return {tensor.name(): tensor.as_numpy() for tensor in request.inputs()}


def _unbatch(tensors: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    value = tensors.get(name)
    if value is None:
        return None
    if value.ndim == 0 or value.shape[0] != 1:
        raise InvalidRequest(
            f"{name}: batch size must be 1 per request, got shape {list(value.shape)}"
        )
    return value[0]


def _scalar(tensors: Mapping[str, np.ndarray], name: str) -> Any:
    value = _unbatch(tensors, name)
    if value is None:
        return None
    if value.size != 1:
        raise InvalidRequest(f"{name} must be a single value, got shape {list(value.shape)}")
    return value.reshape(-1)[0]


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _strings(tensors: Mapping[str, np.ndarray], name: str) -> tuple[str, ...]:
    value = _unbatch(tensors, name)
    if value is None:
        return ()
    return tuple(text for text in (_text(v) for v in value.reshape(-1)) if text)


def _option(tensors: Mapping[str, np.ndarray], name: str, cast: type, default: Any) -> Any:
    value = _scalar(tensors, name)
    return default if value is None else cast(value)


def _guide(tensors: Mapping[str, np.ndarray]) -> tuple[str | None, str | None]:
    """``(guide type, guide)`` as TensorRT-LLM's backend reads them (``utils.cc``
    ``getGuidedDecodingParamsFromTensors``): a type it does not map is dropped, and the guide
    with it, silently (the gateway validates before sending); a guide without a type is
    ignored; an empty guide tensor is an empty guide."""
    guide_type = _scalar(tensors, "guided_decoding_guide_type")
    if guide_type is None or _text(guide_type) not in GUIDE_TYPES:
        return None, None
    guide = _scalar(tensors, "guided_decoding_guide")
    return _text(guide_type), None if guide is None else _text(guide)


def parse_request(
    tensors: Mapping[str, np.ndarray], names: InputNames
) -> tuple[GenerationRequest, ReturnFlags]:
    """The kit request and response flags for one Triton request's tensors."""
    text = _scalar(tensors, "text_input")
    max_tokens = _scalar(tensors, "max_tokens")
    if text is None or max_tokens is None:
        raise InvalidRequest("text_input and max_tokens must be given")
    extra_id = _option(tensors, "prompt_table_extra_id", int, 0)
    images = _unbatch(tensors, "image_input")
    if images is None:
        images = _unbatch(tensors, "image_bytes_input")
    log_probs = _option(tensors, "return_log_probs", bool, False)
    generation_logits = _option(tensors, "return_generation_logits", bool, False)
    guide_type, guide = _guide(tensors)
    request = GenerationRequest(
        text_input=_text(text),
        max_tokens=int(max_tokens),
        images=images,
        video=_unbatch(tensors, "video_bytes_input"),
        temperature=_option(tensors, "temperature", float, 1.0),
        top_k=_option(tensors, "top_k", int, 0),
        top_p=_option(tensors, "top_p", float, 0.0),
        seed=_option(tensors, names.seed, int, 0),
        end_id=_option(tensors, "end_id", int, None),
        pad_id=_option(tensors, "pad_id", int, None),
        stop_words=_strings(tensors, "stop_words"),
        bad_words=_strings(tensors, "bad_words"),
        min_tokens=_option(tensors, names.min_tokens, int, 0),
        repetition_penalty=_option(tensors, "repetition_penalty", float, 1.0),
        presence_penalty=_option(tensors, "presence_penalty", float, 0.0),
        frequency_penalty=_option(tensors, "frequency_penalty", float, 0.0),
        length_penalty=_option(tensors, "length_penalty", float, 1.0),
        beam_width=_option(tensors, "beam_width", int, 1),
        extra_id=extra_id or None,  # 0 is the uint64 default: no id
        image_sizes=_unbatch(tensors, "image_sizes_input"),
        decoder_text=_text(_scalar(tensors, "decoder_text_input") or b""),
        return_log_probs=log_probs,
        return_generation_logits=generation_logits,
        guide_type=guide_type,
        guide=guide,
        lora_task_id=_option(tensors, "lora_task_id", int, None),
        lora_weights=_unbatch(tensors, "lora_weights"),
        lora_config=_unbatch(tensors, "lora_config"),
    )
    flags = ReturnFlags(
        stream=_option(tensors, "stream", bool, False),
        num_input_tokens=_option(tensors, "return_num_input_tokens", bool, False),
        num_output_tokens=_option(tensors, "return_num_output_tokens", bool, False),
        perf_metrics=_option(tensors, "return_perf_metrics", bool, False),
        log_probs=log_probs,
        generation_logits=generation_logits,
    )
    return request, flags


def _int32(value: int) -> np.ndarray:
    return np.array([[value]], dtype=np.int32)


def response_outputs(
    text: str, stats: GenerationStats, flags: ReturnFlags
) -> dict[str, np.ndarray]:
    """Output arrays for one response, batch dim included: ``text_output`` is ``[1, 1]``."""
    outputs = {"text_output": np.array([[text.encode("utf-8")]], dtype=np.object_)}
    if flags.num_input_tokens:
        outputs["num_input_tokens"] = _int32(stats.input_tokens)
    if flags.num_output_tokens:
        outputs["num_output_tokens"] = _int32(stats.output_tokens)
    if flags.perf_metrics:
        outputs["kv_cache_reused_blocks"] = _int32(stats.reused_blocks)
        outputs["kv_cache_alloc_new_blocks"] = _int32(stats.new_blocks)
        outputs["kv_cache_alloc_total_blocks"] = _int32(stats.total_blocks)
    return outputs


def score_outputs(steps: Sequence[Step], flags: ReturnFlags, new: int) -> dict[str, np.ndarray]:
    """Log-prob and logits outputs of a response after ``steps``, ``new`` of them in it.

    As TensorRT-LLM's C++ backend fills them (one beam): ``cum_log_probs`` ``[1, 1]`` after the
    last step; ``output_log_probs`` ``[1, 1, T]`` for *every* step so far, even when streaming;
    ``generation_logits`` ``[1, 1, new, vocab]`` for the response's own steps only. Empty when
    the flags ask for neither.
    """
    outputs: dict[str, np.ndarray] = {}
    if flags.log_probs and steps:
        log_probs = [step.log_prob for step in steps]
        outputs["cum_log_probs"] = np.array([[steps[-1].cum_log_prob]], dtype=np.float32)
        outputs["output_log_probs"] = np.array([[log_probs]], dtype=np.float32)
    if flags.generation_logits and new:
        rows = [step.logits for step in steps[len(steps) - new :]]
        outputs["generation_logits"] = np.stack(rows).astype(np.float32)[None, None]
    return outputs


def to_pb_tensors(pb_utils: Any, outputs: Mapping[str, np.ndarray]) -> list[Any]:
    """Wrap output arrays as ``pb_utils.Tensor`` objects."""
    return [pb_utils.Tensor(name, array) for name, array in outputs.items()]
