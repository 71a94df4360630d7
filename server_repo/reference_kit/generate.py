"""The step loop: prefill (reusing cached prefix blocks), then one token per step.

Prefill computes ``inputs_embeds`` for the whole prompt (text embeddings with the visual features
spliced in), takes the longest block-aligned prefix found in the ``PrefixCache`` (always leaving
at least the last prompt token to compute, for its logits), and runs the model only on the rest
with the cached KV as ``past_key_values``. The prompt's newly computed full blocks are then
stored. Decoding feeds one token at a time through a transformers ``DynamicCache``.

Stopping mirrors TensorRT-LLM: ``end_id`` (emitted and counted, it decodes to ""), a stop word
(its tokens stay in the output), ``max_tokens``, or the caller's ``is_cancelled`` going true.
Token choice (and, when asked, its log probs and raw logits) is ``sampling.Sampler``'s job;
text decoding is the engine's.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from server_repo.reference_kit.prefix_cache import PrefixCache, join_blocks, slice_blocks
from server_repo.reference_kit.request import GenerationStats
from server_repo.reference_kit.sampling import Sampled, Sampler
from server_repo.reference_kit.templates import Prompt


@dataclass(frozen=True)
class StopRule:
    """When to stop: ``end_id`` (< 0: never), stop word id sequences, a token budget."""

    end_id: int
    stop_sequences: tuple[tuple[int, ...], ...]
    max_tokens: int

    def reason(self, generated: Sequence[int]) -> str | None:
        if self.end_id >= 0 and generated[-1] == self.end_id:
            return "end_id"
        for word in self.stop_sequences:
            if word and tuple(generated[-len(word) :]) == word:
                return "stop_word"
        if len(generated) >= self.max_tokens:
            return "length"
        return None


StepInputs = Callable[[int, int], dict[str, Any]]
"""Extra model arguments for the positions ``[start, start + length)`` of one call."""


@dataclass(frozen=True)
class LanguageModel:
    """What the step loop calls: a module taking ``inputs_embeds``, plus per-call extras.

    ``step_inputs`` adds what some architectures need besides embeddings (Qwen2-VL's M-RoPE
    position ids, Mllama's cross-attention); ``reuse_prefix`` False turns the prefix cache off
    for models whose KV also depends on something outside the prompt tokens.
    """

    module: PreTrainedModel
    step_inputs: StepInputs | None = None
    reuse_prefix: bool = True

    def logits(self, embeds: torch.Tensor, past: DynamicCache, start: int) -> torch.Tensor:
        """Run on ``embeds`` (positions from ``start``) after ``past``; the last logits."""
        extra = self.step_inputs(start, embeds.shape[1]) if self.step_inputs else {}
        if _keeps_logits(type(self.module)):
            extra["logits_to_keep"] = 1
        output = self.module(inputs_embeds=embeds, past_key_values=past, use_cache=True, **extra)
        return output.logits[0, -1]

    def new_cache(self, layers: list | None = None) -> DynamicCache:
        config = self.module.config.get_text_config(decoder=True)
        if layers:
            return DynamicCache(ddp_cache_data=layers, config=config)
        return DynamicCache(config=config)


@functools.cache
def _keeps_logits(module_class: type) -> bool:
    """Whether ``forward`` takes ``logits_to_keep`` (most causal LMs; OPT and Fuyu do not)."""
    return "logits_to_keep" in inspect.signature(module_class.forward).parameters


def _as_language_model(model: PreTrainedModel | LanguageModel) -> LanguageModel:
    return model if isinstance(model, LanguageModel) else LanguageModel(model)


def prefill(
    model: PreTrainedModel | LanguageModel,
    embeds: torch.Tensor,
    prompt: Prompt,
    cache: PrefixCache,
    extra_id: int | None,
) -> tuple[torch.Tensor, DynamicCache, int]:
    """Logits after the prompt, the KV cache, and how many cached blocks were reused."""
    lm = _as_language_model(model)
    size = cache.tokens_per_block
    keys = cache.block_keys(prompt.token_ids, prompt.media_mask, extra_id)
    if not lm.reuse_prefix:
        keys = [None] * len(keys)
    blocks = cache.lookup(keys)
    reused_tokens = min(len(blocks) * size, len(prompt) - 1)
    past = lm.new_cache(join_blocks(blocks, reused_tokens) if reused_tokens > 0 else None)
    logits = lm.logits(embeds[:, reused_tokens:], past, reused_tokens)
    full_blocks = len(prompt) // size
    # The new blocks are cut out (a copy per layer) only for a cache that keeps them.
    if cache.stores and full_blocks > len(blocks) and keys[len(blocks)] is not None:
        layers = [(layer.keys, layer.values) for layer in past.layers]
        fresh = slice_blocks(layers, len(blocks), full_blocks - len(blocks), size)
        cache.insert(keys, fresh, first=len(blocks))
    return logits, past, len(blocks)


def run_steps(
    model: PreTrainedModel | LanguageModel,
    embeds: torch.Tensor,
    prompt: Prompt,
    cache: PrefixCache,
    extra_id: int | None,
    sampler: Sampler,
    stop: StopRule,
    stats: GenerationStats,
    is_cancelled: Callable[[], bool] | None = None,
) -> Iterator[Sampled]:
    """Yield generated tokens one by one, updating ``stats`` before each yield.

    Inference mode is entered around each computation, never held across a ``yield``: it is
    thread-local state that would otherwise leak into the consumer between steps.
    """
    if is_cancelled is not None and is_cancelled():
        stats.cancelled, stats.finish_reason = True, "cancelled"
        return
    lm = _as_language_model(model)
    with torch.inference_mode():
        logits, past, reused = prefill(lm, embeds, prompt, cache, extra_id)
    stats.reused_blocks = reused
    embed_tokens = lm.module.get_input_embeddings()

    def next_logits(token: int, generated: list[int]) -> torch.Tensor:
        step = embed_tokens(torch.tensor([[token]], device=embeds.device))
        return lm.logits(step, past, len(prompt) + len(generated) - 1)

    yield from decode_loop(logits, next_logits, sampler, stop, stats, is_cancelled)


def decode_loop(
    logits: torch.Tensor,
    next_logits: Callable[[int, list[int]], torch.Tensor],
    sampler: Sampler,
    stop: StopRule,
    stats: GenerationStats,
    is_cancelled: Callable[[], bool] | None,
) -> Iterator[Sampled]:
    """Sample, yield, check stop and cancellation, step: the loop every engine shares
    (decoder-only here, encoder-decoder in ``seq2seq``). ``next_logits(token, generated)``
    runs the model one step; inference mode is entered around it and around sampling, never
    held across a ``yield``."""
    generated: list[int] = []
    while True:
        with torch.inference_mode():
            sampled = sampler.sample(logits, generated)
        token = sampled.token
        generated.append(token)
        stats.output_tokens = len(generated)
        yield sampled
        stats.finish_reason = stop.reason(generated)
        if stats.finish_reason is not None:
            return
        if is_cancelled is not None and is_cancelled():
            stats.cancelled, stats.finish_reason = True, "cancelled"
            return
        with torch.inference_mode():
            logits = next_logits(token, generated)
