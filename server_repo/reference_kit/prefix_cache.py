"""A block-granular KV prefix cache keyed on (prompt_table_extra_id, token prefix).

It mirrors TensorRT-LLM's KV-cache reuse closely enough that the gateway's extra-id logic is
exercised for real:

- the prompt is cut into blocks of ``tokens_per_block`` tokens; only full blocks are cached;
- each block's key chain-hashes the parent block's key with the block's token ids, so a key
  names the whole prefix up to and including that block;
- a block holding image/video feature positions also hashes ``prompt_table_extra_id``: a
  different id never matches. Without an extra id such a block (and every later one) gets no key
  at all, so image blocks are never reused. TRT-LLM would instead reuse them, because every image
  gets the same fake token ids: a silent wrong answer. Refusing is the safe reading;
- only the prompt's full blocks are stored (TRT-LLM also keeps blocks of generated tokens);
  a repeated prompt reuses all of them but the block holding its last token;
- entries are evicted least recently used, bounded by the total cached tokens. A lookup touches
  the deepest block first and the root last, so leaves leave before the prefixes they extend.

Stored values are per-layer ``(keys, values)`` slices ``[1, kv_heads, tokens_per_block, head_dim]``
cloned out of a transformers ``DynamicCache``. Building the cache back for a request and running
the model are the step loop's job (``generate.py``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

DEFAULT_TOKENS_PER_BLOCK = 16
DEFAULT_MAX_CACHED_TOKENS = 65536

KVBlock = tuple[tuple[torch.Tensor, torch.Tensor], ...]


@dataclass(frozen=True)
class CacheInfo:
    """A snapshot for tests and logs."""

    blocks: int
    cached_tokens: int
    max_cached_tokens: int


class PrefixCache:
    """Thread-safe LRU map from chained block keys to per-layer KV slices."""

    def __init__(
        self,
        tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK,
        max_cached_tokens: int = DEFAULT_MAX_CACHED_TOKENS,
    ) -> None:
        if tokens_per_block < 1:
            raise ValueError("tokens_per_block must be >= 1")
        self.tokens_per_block = tokens_per_block
        self.max_cached_tokens = max(0, max_cached_tokens)
        self._blocks: OrderedDict[bytes, KVBlock] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def stores(self) -> bool:
        """Whether a block fits at all (``max_cached_tokens`` 0 turns the cache off)."""
        return self.max_cached_tokens >= self.tokens_per_block

    def block_keys(
        self, token_ids: Sequence[int], media_mask: Sequence[bool], extra_id: int | None
    ) -> list[bytes | None]:
        """One key per full block; ``None`` from the first media block lacking an extra id on."""
        keys: list[bytes | None] = []
        parent = b"root"
        size = self.tokens_per_block
        for start in range(0, len(token_ids) - size + 1, size):
            has_media = any(media_mask[start : start + size])
            if has_media and extra_id is None:
                break
            digest = hashlib.blake2b(parent, digest_size=16)
            digest.update(np.asarray(token_ids[start : start + size], dtype=np.int64).tobytes())
            if has_media:
                digest.update(b"extra-id:" + int(extra_id).to_bytes(8, "little"))
            parent = digest.digest()
            keys.append(parent)
        keys.extend([None] * (len(token_ids) // size - len(keys)))
        return keys

    def lookup(self, keys: Sequence[bytes | None]) -> list[KVBlock]:
        """The KV blocks of the longest cached prefix of ``keys`` (touched as recently used)."""
        found: list[tuple[bytes, KVBlock]] = []
        with self._lock:
            for key in keys:
                block = self._blocks.get(key) if key is not None else None
                if block is None:
                    break
                found.append((key, block))
            self._touch([key for key, _ in found])
        return [block for _, block in found]

    def insert(self, keys: Sequence[bytes | None], blocks: Sequence[KVBlock], first: int) -> int:
        """Store ``blocks[i]`` under ``keys[first + i]``; stop at the first keyless block.

        Returns how many blocks were stored. Evicts least recently used blocks beyond the bound.
        """
        if not self.stores:
            return 0
        stored: list[bytes] = []
        with self._lock:
            for key, block in zip(keys[first:], blocks, strict=False):
                if key is None:
                    break
                self._blocks.setdefault(key, block)
                stored.append(key)
            self._touch(list(keys[:first]) + stored)
            self._evict()
        return len(stored)

    def info(self) -> CacheInfo:
        with self._lock:
            blocks = len(self._blocks)
        return CacheInfo(blocks, blocks * self.tokens_per_block, self.max_cached_tokens)

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()

    def _touch(self, chain: Sequence[bytes | None]) -> None:
        """Mark a chain as most recently used, root last so that it is evicted last."""
        for key in reversed(chain):
            if key is not None and key in self._blocks:
                self._blocks.move_to_end(key)

    def _evict(self) -> None:
        while len(self._blocks) * self.tokens_per_block > self.max_cached_tokens:
            self._blocks.popitem(last=False)


def slice_blocks(
    layers: Sequence[tuple[torch.Tensor, torch.Tensor]], first: int, count: int, size: int
) -> list[KVBlock]:
    """Cut ``count`` blocks starting at block ``first`` out of per-layer ``[1, h, T, d]`` KV."""
    blocks: list[KVBlock] = []
    for index in range(first, first + count):
        lo, hi = index * size, (index + 1) * size
        blocks.append(tuple((k[:, :, lo:hi].clone(), v[:, :, lo:hi].clone()) for k, v in layers))
    return blocks


def join_blocks(blocks: Sequence[KVBlock], tokens: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Concatenate blocks into per-layer KV covering the first ``tokens`` positions."""
    layers = len(blocks[0])
    joined = []
    for layer in range(layers):
        keys = torch.cat([block[layer][0] for block in blocks], dim=2)[:, :, :tokens]
        values = torch.cat([block[layer][1] for block in blocks], dim=2)[:, :, :tokens]
        joined.append((keys, values))
    return joined
