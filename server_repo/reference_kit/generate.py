"""The step loop: prefill (reusing cached prefix blocks), then one token per step.

Prefill computes ``inputs_embeds`` for the whole prompt (text embeddings with the visual features
spliced in), takes the longest block-aligned prefix found in the ``PrefixCache`` (always leaving
at least the last prompt token to compute, for its logits), and runs the model only on the rest
with the cached KV as ``past_key_values``. The prompt's newly computed full blocks are then
stored. Decoding feeds one token at a time through a transformers ``DynamicCache``.

Stopping mirrors TensorRT-LLM: ``end_id`` (emitted and counted, it decodes to ""), a stop word
(its tokens stay in the output), ``max_tokens``, or the caller's ``is_cancelled`` going true.
Token choice is ``sampling.Sampler``'s job; text decoding is the engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from server_repo.reference_kit.prefix_cache import PrefixCache, join_blocks, slice_blocks
from server_repo.reference_kit.request import GenerationStats
from server_repo.reference_kit.sampling import Sampler
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


def _text_config(model: PreTrainedModel) -> object:
    return model.config.get_text_config(decoder=True)


def _logits(model: PreTrainedModel, embeds: torch.Tensor, past: DynamicCache) -> torch.Tensor:
    """Run the language model on ``embeds`` after ``past``; the last position's logits."""
    output = model(inputs_embeds=embeds, past_key_values=past, use_cache=True, logits_to_keep=1)
    return output.logits[0, -1]


def prefill(
    model: PreTrainedModel,
    embeds: torch.Tensor,
    prompt: Prompt,
    cache: PrefixCache,
    extra_id: int | None,
) -> tuple[torch.Tensor, DynamicCache, int]:
    """Logits after the prompt, the KV cache, and how many cached blocks were reused."""
    size = cache.tokens_per_block
    keys = cache.block_keys(prompt.token_ids, prompt.media_mask, extra_id)
    blocks = cache.lookup(keys)
    reused_tokens = min(len(blocks) * size, len(prompt) - 1)
    config = _text_config(model)
    if reused_tokens > 0:
        past = DynamicCache(ddp_cache_data=join_blocks(blocks, reused_tokens), config=config)
    else:
        past = DynamicCache(config=config)
    logits = _logits(model, embeds[:, reused_tokens:], past)
    full_blocks = len(prompt) // size
    if full_blocks > len(blocks) and keys[len(blocks)] is not None:
        layers = [(layer.keys, layer.values) for layer in past.layers]
        fresh = slice_blocks(layers, len(blocks), full_blocks - len(blocks), size)
        cache.insert(keys, fresh, first=len(blocks))
    return logits, past, len(blocks)


def run_steps(
    model: PreTrainedModel,
    embeds: torch.Tensor,
    prompt: Prompt,
    cache: PrefixCache,
    extra_id: int | None,
    sampler: Sampler,
    stop: StopRule,
    stats: GenerationStats,
    is_cancelled: Callable[[], bool] | None = None,
) -> Iterator[int]:
    """Yield generated token ids one by one, updating ``stats`` before each yield.

    Inference mode is entered around each computation, never held across a ``yield``: it is
    thread-local state that would otherwise leak into the consumer between steps.
    """
    if is_cancelled is not None and is_cancelled():
        stats.cancelled, stats.finish_reason = True, "cancelled"
        return
    with torch.inference_mode():
        logits, past, reused = prefill(model, embeds, prompt, cache, extra_id)
    stats.reused_blocks = reused
    embed_tokens = model.get_input_embeddings()
    generated: list[int] = []
    while True:
        with torch.inference_mode():
            token = sampler.choose(logits, generated)
        generated.append(token)
        stats.output_tokens = len(generated)
        yield token
        stats.finish_reason = stop.reason(generated)
        if stats.finish_reason is not None:
            return
        if is_cancelled is not None and is_cancelled():
            stats.cancelled, stats.finish_reason = True, "cancelled"
            return
        with torch.inference_mode():
            step = embed_tokens(torch.tensor([[token]], device=embeds.device))
            logits = _logits(model, step, past)
