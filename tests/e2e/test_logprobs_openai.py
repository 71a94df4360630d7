"""Log probabilities end to end: the OpenAI SDK, the gateway, the real Triton and the reference
model, checked against an independent oracle (transformers' own greedy ``generate`` on the same
weights): each chosen token's logprob is log_softmax of the model's logits at that token, and the
top alternatives are that distribution's top entries, named by the model's tokenizer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from openai import AsyncOpenAI

from gateway.families.base import Conversation, Turn
from gateway.families.registry import get_family
from server_repo.reference_kit import GenerationRequest, load_engine
from tests.server_repo.reference_kit.hf_oracle import hf_greedy_logits

pytestmark = pytest.mark.e2e

QUESTION = "Tell me a story about a robot."
TOKENS = 6
TOP = 3


async def _oracle(cache: Path) -> tuple[list[str], list[float], list[list[tuple[str, float]]]]:
    engine = await asyncio.to_thread(load_engine, "reference_llava", cache_dir=cache, device="cpu")
    text = get_family("llava").render(Conversation(None, (Turn("user", QUESTION),)))
    request = GenerationRequest(text_input=text, max_tokens=TOKENS)
    ids, logits = await asyncio.to_thread(hf_greedy_logits, engine, request)
    log_q = torch.log_softmax(logits.double(), dim=-1)
    # The streamed text of a token: decoded alone, special tokens skipped (as postprocessing).
    tokens = [engine.tokenizer.decode([i], skip_special_tokens=True) for i in ids]
    chosen = [float(log_q[step, i]) for step, i in enumerate(ids)]
    top = []
    for row in log_q:
        values, best = torch.topk(row, TOP)
        top.append(
            [
                (engine.tokenizer.decode([int(i)]), float(v))
                for v, i in zip(values, best, strict=True)
            ]
        )
    return tokens, chosen, top


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_logprobs_equal_the_model_s_log_softmax(
    gateway_url: str, reference_cache: Path, stream: bool
) -> None:
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    options = {
        "model": "reference-llava",
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": TOKENS,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": TOP,
    }
    if stream:
        chunks = [c async for c in await client.chat.completions.create(**options, stream=True)]
        entries = [e for c in chunks if c.choices and c.choices[0].logprobs
                   for e in c.choices[0].logprobs.content or []]  # fmt: skip
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        response = await client.chat.completions.create(**options)
        entries = response.choices[0].logprobs.content
        content = response.choices[0].message.content
    tokens, chosen, top = await _oracle(reference_cache)
    assert len(entries) > 1 and content == "".join(e.token for e in entries)
    assert [e.token for e in entries] == tokens[: len(entries)]
    assert [e.logprob for e in entries] == pytest.approx(chosen[: len(entries)], abs=1e-4)
    for entry, expected in zip(entries, top, strict=False):
        assert [t.token for t in entry.top_logprobs] == [name for name, _ in expected]
        assert [t.logprob for t in entry.top_logprobs] == pytest.approx(
            [value for _, value in expected], abs=1e-4
        )


async def test_completions_logprobs_through_the_sdk(gateway_url: str) -> None:
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    response = await client.completions.create(
        model="reference-llava", prompt="The quick brown fox", max_tokens=4, temperature=0,
        logprobs=2,
    )  # fmt: skip
    choice = response.choices[0]
    logprobs = choice.logprobs
    assert "".join(logprobs.tokens) == choice.text and len(logprobs.tokens) >= 1
    assert logprobs.text_offset[0] == 0
    for token, value, top in zip(
        logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs, strict=True
    ):
        assert value <= 0 and top[token] == pytest.approx(value, abs=1e-4)
        assert 2 <= len(top) <= 3  # the top 2, and the chosen token when it is not among them
