"""Which LoRA adapter a request uses, and whether its weights must travel with it.

TensorRT-LLM's backend caches an adapter by ``lora_task_id`` once it has seen its weights;
later requests send the id alone (sending weights every time costs megabytes per request,
sending the id of an adapter the server never saw fails). So the gateway remembers, per
Triton model, which task ids it has delivered (``LoraLedger``), loads an adapter's ``.npy``
files only when they must be sent, and forgets an id when a request carrying only the id
fails, so the next request sends the weights again (the server may have evicted it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gateway.config import LoraAdapter, ServedModel
from gateway.errors import InvalidRequest
from gateway.triton.lora import LoraLedger

WEIGHTS_FILE = "model.lora_weights.npy"
CONFIG_FILE = "model.lora_config.npy"


@dataclass(frozen=True)
class LoraChoice:
    task_id: int
    weights: np.ndarray[Any, Any] | None = None  # with the first request of the id only
    config: np.ndarray[Any, Any] | None = None


def choose_adapter(served: ServedModel, requested: int | None) -> LoraAdapter | None:
    """The request's adapter: the one it names, else the model's first; None without any."""
    if requested is None:
        return served.lora[0] if served.lora else None
    for adapter in served.lora:
        if adapter.task_id == requested:
            return adapter
    known = [a.task_id for a in served.lora]
    raise InvalidRequest(
        f"lora_task_id {requested} is not an adapter of model '{served.id}'"
        + (f"; its adapters: {known}" if known else "; it is served without LoRA adapters"),
        param="lora_task_id",
        code="invalid_lora_task_id",
    )


def load_adapter(folder: Path) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The converted adapter as the wire wants it: fp16 weights [1, n, size] and int32
    config [1, n, 3] (``hf_lora_convert.py`` writes them with the batch axis; add it if not)."""
    weights = np.load(folder / WEIGHTS_FILE, allow_pickle=False)
    config = np.load(folder / CONFIG_FILE, allow_pickle=False)
    weights = weights[np.newaxis] if weights.ndim == 2 else weights
    config = config[np.newaxis] if config.ndim == 2 else config
    if weights.ndim != 3 or config.ndim != 3 or config.shape[-1] != 3:
        raise ValueError(
            f"LoRA adapter in {folder}: expected weights [1, n, size] and config [1, n, 3], "
            f"got {weights.shape} and {config.shape}"
        )
    if weights.shape[1] != config.shape[1]:
        raise ValueError(f"LoRA adapter in {folder}: weights and config disagree on modules")
    return weights.astype(np.float16, copy=False), config.astype(np.int32, copy=False)


async def lora_choice(
    served: ServedModel, ledger: LoraLedger, requested: int | None
) -> LoraChoice | None:
    """The task id to send, with the adapter's arrays if this Triton model has not had them."""
    adapter = choose_adapter(served, requested)
    if adapter is None:
        return None
    if not ledger.needs_weights(adapter.task_id):
        return LoraChoice(adapter.task_id)
    weights, config = await asyncio.to_thread(load_adapter, adapter.weights_path)
    return LoraChoice(adapter.task_id, weights, config)
