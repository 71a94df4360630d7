"""LoRA adapters as TensorRT-LLM's Triton backend takes them: ``lora_task_id``, and with its
first use ``lora_weights`` and ``lora_config``; cached afterwards by task id.

The tensors are the ones NVIDIA's ``hf_lora_convert.py`` writes (tensorrtllm_backend
``all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt`` describes them): each row of
``lora_config`` is ``[module_id, layer_idx, adapter_size]``, and the same row of
``lora_weights`` holds that module's "in" matrix ``[r, hidden_in]`` then its "out" matrix
``[hidden_out, r]``, each flattened. Module ids: 1 attn_q, 2 attn_k, 3 attn_v, 4 attn_dense,
5 mlp_h_to_4h, 6 mlp_4h_to_h, 7 mlp_gate. A request with a task id that has no weights and is
not cached fails as TensorRT-LLM's does. An adapter is applied by merging ``out @ in`` into a
copy of the model's weights (the tiny models make a copy cheap), so the requests of different
adapters never share a module.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import torch
from transformers import PreTrainedModel

from server_repo.reference_kit.request import GenerationRequest, InvalidRequest

MODULES = {
    1: "self_attn.q_proj",
    2: "self_attn.k_proj",
    3: "self_attn.v_proj",
    4: "self_attn.o_proj",
    5: "mlp.up_proj",
    6: "mlp.down_proj",
    7: "mlp.gate_proj",
}


def merged(model: PreTrainedModel, weights: np.ndarray, config: np.ndarray) -> PreTrainedModel:
    """A copy of ``model`` with the adapter merged into its language model's linear layers."""
    weights = np.asarray(weights, dtype=np.float32).reshape(-1, np.shape(weights)[-1])
    config = np.asarray(config).reshape(-1, 3)
    if len(weights) != len(config):
        raise InvalidRequest(
            f"lora_weights has {len(weights)} rows but lora_config {len(config)}: one per module"
        )
    adapted = copy.deepcopy(model)
    layers = adapted.model.language_model.layers
    with torch.no_grad():
        for row, (module_id, layer, rank) in zip(weights, config.tolist(), strict=True):
            if module_id not in MODULES or not 0 <= layer < len(layers):
                raise InvalidRequest(f"lora_config row {[module_id, layer, rank]} names no module")
            linear = layers[layer].get_submodule(MODULES[module_id])
            out_features, in_features = linear.weight.shape
            size = rank * in_features + out_features * rank
            if rank < 1 or size > len(row):
                raise InvalidRequest(f"lora_weights row too short for rank {rank}")
            a = torch.from_numpy(row[: rank * in_features].reshape(rank, in_features))
            b = torch.from_numpy(row[rank * in_features : size].reshape(out_features, rank))
            linear.weight += (b @ a).to(linear.weight.dtype)
    return adapted


class LoraCache:
    """The adapters a model has been sent, by task id (TensorRT-LLM's LoRA cache)."""

    def __init__(self) -> None:
        self._models: dict[int, PreTrainedModel] = {}
        self._lock = threading.Lock()

    def model_for(self, base: PreTrainedModel, request: GenerationRequest) -> PreTrainedModel:
        """The model this request runs: the base, or its task's adapted copy."""
        task = request.lora_task_id
        if task is None:
            if request.lora_weights is not None:
                raise InvalidRequest("lora_weights need a lora_task_id")
            return base
        if request.lora_weights is not None:
            if request.lora_config is None:
                raise InvalidRequest("lora_weights need lora_config")
            adapted = merged(base, request.lora_weights, request.lora_config)
            with self._lock:
                self._models[task] = adapted
            return adapted
        with self._lock:
            found = self._models.get(task)
        if found is None:
            raise InvalidRequest(
                f"LoRA task {task} not found in cache. Please send LoRA weights with request"
            )
        return found
