"""The affinity key of one call: what makes two requests land on the same replica.

TensorRT-LLM reuses KV blocks inside one replica, keyed on ``prompt_table_extra_id`` and the
token prefix. So a request with media is keyed on its content id (the very digest sent as
``prompt_table_extra_id``): every question about one image meets the image's cached blocks. A
text-only request is keyed on its rendered prompt's first KV block, approximated in characters
(the gateway does not tokenize): requests sharing a system prompt share a replica.
"""

from __future__ import annotations

import hashlib

from gateway.families.calls import GenerationRequest

CHARS_PER_TOKEN = 4  # a BPE token of English text, on average
DEFAULT_TOKENS_PER_BLOCK = 64  # TensorRT-LLM's usual tokens_per_block when the config is silent


def routing_key(call: GenerationRequest, tokens_per_block: int | None) -> int | None:
    """The content id, or a 64-bit hash of the prompt's first block; None for no prompt."""
    return prompt_key(call.prompt_table_extra_id, call.text_input, tokens_per_block)


def prompt_key(content_id: int | None, prompt: str, tokens_per_block: int | None) -> int | None:
    """Any contract's key: the media's content id (NVIDIA's llmapi model is sent the same
    digest-keyed images, so repeated images meet their cached blocks there too), else the
    prompt's first block."""
    if content_id is not None:
        return content_id
    if not prompt:
        return None
    chars = (tokens_per_block or DEFAULT_TOKENS_PER_BLOCK) * CHARS_PER_TOKEN
    digest = hashlib.blake2b(prompt[:chars].encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")
