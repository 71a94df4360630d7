"""The prefix cache: chained block keys, extra-id isolation for media, LRU bound, real reuse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from server_repo.reference_kit.prefix_cache import PrefixCache, join_blocks, slice_blocks
from tests.server_repo.samples import llava_pixels, rgb_image

TEXT = tuple(range(100, 140))  # 40 tokens: 2 full blocks of 16 and a partial one
NO_MEDIA = (False,) * 40


def _kv(tokens: int, layers: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [
        (torch.arange(tokens).float().view(1, 1, tokens, 1).expand(1, 2, tokens, 4) + layer,
         -torch.arange(tokens).float().view(1, 1, tokens, 1).expand(1, 2, tokens, 4))
        for layer in range(layers)
    ]  # fmt: skip


def test_keys_chain_over_the_prefix() -> None:
    cache = PrefixCache(16)
    keys = cache.block_keys(TEXT, NO_MEDIA, None)
    assert len(keys) == 2 and None not in keys
    changed = cache.block_keys((0, *TEXT[1:]), NO_MEDIA, None)
    assert changed[0] != keys[0] and changed[1] != keys[1]  # block 1's key names its prefix too
    tail_changed = cache.block_keys((*TEXT[:20], 0, *TEXT[21:]), NO_MEDIA, None)
    assert tail_changed[0] == keys[0] and tail_changed[1] != keys[1]


def test_media_blocks_need_and_hash_the_extra_id() -> None:
    cache = PrefixCache(16)
    mask = (False,) * 16 + (True,) * 10 + (False,) * 14
    assert cache.block_keys(TEXT, mask, None) == [cache.block_keys(TEXT, NO_MEDIA, None)[0], None]
    one, two = cache.block_keys(TEXT, mask, 1), cache.block_keys(TEXT, mask, 2)
    assert one[0] == two[0]  # the text-only first block does not depend on the id
    assert one[1] != two[1]
    assert cache.block_keys(TEXT, NO_MEDIA, 1) == cache.block_keys(TEXT, NO_MEDIA, 2)


def test_lookup_returns_the_longest_cached_prefix() -> None:
    cache = PrefixCache(16)
    keys = cache.block_keys(TEXT, NO_MEDIA, None)
    kv = _kv(40)
    assert cache.insert(keys, slice_blocks(kv, 0, 1, 16), first=0) == 1
    found = cache.lookup(keys)
    assert len(found) == 1
    cache.insert(keys, slice_blocks(kv, 1, 1, 16), first=1)
    joined = join_blocks(cache.lookup(keys), 31)
    assert joined[1][0].shape == (1, 2, 31, 4)
    assert torch.equal(joined[1][0], kv[1][0][:, :, :31])
    assert torch.equal(joined[0][1], kv[0][1][:, :, :31])


def test_lru_bound_evicts_leaves_first() -> None:
    cache = PrefixCache(16, max_cached_tokens=48)
    first = cache.block_keys(TEXT, NO_MEDIA, None)
    cache.insert(first, slice_blocks(_kv(40), 0, 2, 16), first=0)
    other = tuple(range(500, 540))
    second = cache.block_keys(other, NO_MEDIA, None)
    cache.insert(second, slice_blocks(_kv(40), 0, 2, 16), first=0)
    info = cache.info()
    assert info.blocks == 3 and info.cached_tokens <= 48
    # The first prompt's leaf went first; its root block, touched last, survived.
    assert len(cache.lookup(first)) == 1
    assert len(cache.lookup(second)) == 2


def test_disabled_cache_stores_nothing() -> None:
    cache = PrefixCache(16, max_cached_tokens=0)
    keys = cache.block_keys(TEXT, NO_MEDIA, None)
    assert cache.insert(keys, slice_blocks(_kv(40), 0, 2, 16), first=0) == 0
    assert cache.lookup(keys) == []


def test_llava_same_extra_id_reuses_and_matches_uncached(
    fresh_engine: Callable[..., ReferenceEngine],
) -> None:
    engine = fresh_engine("llava")
    request = GenerationRequest(
        text_input="What is in this image?", images=llava_pixels(1), max_tokens=8, extra_id=11
    )
    first = engine.complete(request)
    second = engine.complete(request)
    uncached = fresh_engine("llava", max_cached_tokens=0).complete(request)
    assert first.stats.reused_blocks == 0
    assert second.stats.reused_blocks == second.stats.input_tokens // 16 > 0
    assert second.token_ids == first.token_ids == uncached.token_ids
    assert second.stats.new_blocks == second.stats.total_blocks - second.stats.reused_blocks


def test_llava_different_extra_id_reuses_no_image_block(
    fresh_engine: Callable[..., ReferenceEngine],
) -> None:
    engine = fresh_engine("llava")
    text = "What is in this image?"
    engine.complete(GenerationRequest(text, images=llava_pixels(1), max_tokens=4, extra_id=1))
    other = engine.complete(
        GenerationRequest(text, images=llava_pixels(2), max_tokens=4, extra_id=2)
    )
    assert other.stats.reused_blocks == 0  # block 0 already holds image positions
    no_id = engine.complete(GenerationRequest(text, images=llava_pixels(2), max_tokens=4))
    assert no_id.stats.reused_blocks == 0
    again = engine.complete(GenerationRequest(text, images=llava_pixels(2), max_tokens=4))
    assert again.stats.reused_blocks == 0  # without an id, image blocks are never cached


def test_onevision_text_blocks_shared_image_blocks_isolated(
    fresh_engine: Callable[..., ReferenceEngine],
) -> None:
    engine = fresh_engine("llava_onevision", tokens_per_block=2)
    head = engine.tokenizer("<|im_start|>user ")["input_ids"]
    prefix_blocks = len(head) // 2  # text-only blocks before the image features
    assert prefix_blocks >= 1
    request = GenerationRequest("Describe it.", images=rgb_image(1), max_tokens=6, extra_id=5)
    first = engine.complete(request)
    other = engine.complete(
        GenerationRequest("Describe it.", images=rgb_image(2), max_tokens=6, extra_id=6)
    )
    assert other.stats.reused_blocks == prefix_blocks
    repeat = engine.complete(request)
    assert repeat.stats.reused_blocks == repeat.stats.input_tokens // 2
    assert repeat.token_ids == first.token_ids


def test_engine_respects_the_cache_bound(fresh_engine: Callable[..., ReferenceEngine]) -> None:
    engine = fresh_engine("llava", max_cached_tokens=1200)
    for seed in range(4):
        request = GenerationRequest(
            "Hi", images=llava_pixels(seed), max_tokens=2, extra_id=seed + 1
        )
        engine.complete(request)
        assert engine.cache.info().cached_tokens <= 1200
    assert engine.cache.info().blocks > 0


def test_a_disabled_cache_costs_the_prefill_no_block_copies(
    fresh_engine: Callable[..., ReferenceEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cutting a prompt's blocks out of the KV is a copy per layer and block (on a 7B model,
    some 2,400 small copies before the first token): only for a cache that keeps them."""
    from server_repo.reference_kit import generate

    copies: list[int] = []

    def counted(*args: Any) -> Any:
        copies.append(args[2])
        return slice_blocks(*args)

    monkeypatch.setattr(generate, "slice_blocks", counted)
    request = GenerationRequest("What is this?", images=llava_pixels(1), max_tokens=2, extra_id=3)
    off = fresh_engine("llava", max_cached_tokens=0).complete(request)
    assert copies == [] and not PrefixCache(16, max_cached_tokens=15).stores
    on = fresh_engine("llava").complete(request)
    assert copies == [on.stats.input_tokens // 16] and on.token_ids == off.token_ids
