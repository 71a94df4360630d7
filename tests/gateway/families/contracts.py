"""Realistic Triton contracts for the families' field-by-field tests, and the one path from a
conversation to the tensors the gateway would send (the pipeline's own functions).

``ensemble`` declares what NVIDIA's ``all_models/multimodal/ensemble`` declares (v0.19 names,
the newer 5-D image inputs); ``bls`` adds the ``tensorrt_llm_bls`` extras (LoRA,
``exclude_input_in_output``). A family test renders its conversation, prepares its images
through its own module, lets ``pipeline.generation.draft`` pick the inputs and
``build_inputs`` name and type them, then reads every tensor back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.config import GenerationPolicy, GenerationSettings, ServedModel
from gateway.families.base import Conversation, Turn
from gateway.families.calls import GenerationRequest
from gateway.families.registry import get_family
from gateway.pipeline.generation import draft
from gateway.pipeline.media import PreparedMedia
from gateway.protocol.chat import ChatCompletionRequest
from gateway.runtime import ServedRuntime
from gateway.triton.contract import ModelContract, parse_model_config
from gateway.triton.tensors import build_inputs

ENSEMBLE_INPUTS: list[tuple[str, str, list[int]]] = [
    ("text_input", "TYPE_STRING", [1]),
    ("decoder_text_input", "TYPE_STRING", [1]),
    ("image_input", "TYPE_FP16", [-1, -1, -1, -1]),
    ("image_bytes_input", "TYPE_UINT8", [-1, -1, -1, -1]),
    ("video_bytes_input", "TYPE_UINT8", [-1, -1, -1, -1]),
    ("max_tokens", "TYPE_INT32", [1]),
    ("bad_words", "TYPE_STRING", [-1]),
    ("stop_words", "TYPE_STRING", [-1]),
    ("end_id", "TYPE_INT32", [1]),
    ("pad_id", "TYPE_INT32", [1]),
    ("top_k", "TYPE_INT32", [1]),
    ("top_p", "TYPE_FP32", [1]),
    ("temperature", "TYPE_FP32", [1]),
    ("length_penalty", "TYPE_FP32", [1]),
    ("repetition_penalty", "TYPE_FP32", [1]),
    ("min_length", "TYPE_INT32", [1]),
    ("presence_penalty", "TYPE_FP32", [1]),
    ("frequency_penalty", "TYPE_FP32", [1]),
    ("random_seed", "TYPE_UINT64", [1]),
    ("return_log_probs", "TYPE_BOOL", [1]),
    ("beam_width", "TYPE_INT32", [1]),
    ("stream", "TYPE_BOOL", [1]),
    ("prompt_table_extra_id", "TYPE_UINT64", [1]),
    ("embedding_bias_words", "TYPE_STRING", [-1]),
    ("embedding_bias_weights", "TYPE_FP32", [-1]),
]
BLS_EXTRA: list[tuple[str, str, list[int]]] = [
    ("exclude_input_in_output", "TYPE_BOOL", [1]),
    ("lora_task_id", "TYPE_UINT64", [1]),
    ("lora_weights", "TYPE_FP16", [-1, -1]),
    ("lora_config", "TYPE_INT32", [-1, 3]),
]


def ensemble(
    *extra: tuple[str, str, list[int]], replace: dict[str, str] | None = None, bls: bool = False
) -> ModelContract:
    """The multimodal ensemble's inputs (or the BLS's), ``replace`` mapping a name to a dtype."""
    entries = [*ENSEMBLE_INPUTS, *(BLS_EXTRA if bls else []), *extra]
    replace = replace or {}
    inputs = [
        {"name": name, "data_type": replace.get(name, dtype), "dims": dims, "optional": True}
        for name, dtype, dims in entries
    ]
    return parse_model_config(
        {
            "name": "tensorrt_llm_bls" if bls else "ensemble",
            "max_batch_size": 8,
            "input": inputs,
            "model_transaction_policy": {"decoupled": True},
        }
    )


def conversation(*turns: tuple[str, str, int], system: str | None = None) -> Conversation:
    """Turns as (role, text, images)."""
    return Conversation(system, tuple(Turn(r, t, images=n) for r, t, n in turns))  # type: ignore[arg-type]


def sample_image(width: int = 640, height: int = 480, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def generation(
    family_name: str,
    chat: Conversation,
    images: Sequence[Image.Image] = (),
    extra_id: int | None = 12345,
    **served_options: Any,
) -> GenerationRequest:
    """What the pipeline decides for this conversation and these images."""
    config = ServedModel(id="m", family=family_name, triton_model="ensemble", **served_options)
    family = get_family(family_name).engine_images(config.max_images)
    family.check_conversation(chat)
    served = ServedRuntime(config, family, client=None)  # type: ignore[arg-type]
    media = None
    if images:
        assert family.image_tensor is not None
        tensor = family.stack_images([family.prepare_image(i) for i in images])
        array = family.image_sizes([(i.height, i.width) for i in images])
        sizes = (family.image_sizes_tensor, array) if array is not None else None
        media = PreparedMedia((family.image_tensor, tensor), extra_id, len(images), sizes)
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}])
    served.use_policy(GenerationPolicy.of(config, GenerationSettings(max_tokens=64)))
    text = family.render(chat)
    stops = tuple(family.stop_strings)
    requested = (request.requested_max_tokens, "max_tokens")
    return draft(request, served, True, text, requested, media, stops)


def sent(
    request: GenerationRequest, contract: ModelContract
) -> dict[str, tuple[str, list[int], Any]]:
    """name -> (wire dtype, shape, numpy value) of every tensor ``build_inputs`` produced."""
    out = {}
    for tensor in build_inputs(request, contract):
        raw = tensor._raw_content
        out[tensor.name()] = (tensor.datatype(), tensor.shape(), _decode(tensor, raw))
    return out


def _decode(tensor: Any, raw: bytes | None) -> Any:
    from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

    if raw is None:
        return None
    if tensor.datatype() == "BYTES":
        return [v.decode("utf-8") for v in deserialize_bytes_tensor(raw)]
    if tensor.datatype() == "BF16":
        return np.frombuffer(raw, dtype=np.uint16).reshape(tensor.shape())
    return np.frombuffer(raw, dtype=triton_to_np_dtype(tensor.datatype())).reshape(tensor.shape())
