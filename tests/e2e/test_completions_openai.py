"""The OpenAI SDK's legacy completions and n > 1 chat against the real co-launched Triton."""

from __future__ import annotations

import pytest
from openai import AsyncOpenAI

pytestmark = pytest.mark.e2e


@pytest.fixture
def client(gateway_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)


async def test_completions_streamed_and_not_agree(client: AsyncOpenAI) -> None:
    whole = await client.completions.create(
        model="reference-llava", prompt="Once upon a time", max_tokens=8, temperature=0
    )
    choice = whole.choices[0]
    assert whole.object == "text_completion" and choice.text
    assert choice.finish_reason in ("length", "stop")
    assert whole.usage is not None and whole.usage.completion_tokens <= 8
    stream = await client.completions.create(
        model="reference-llava", prompt="Once upon a time", max_tokens=8, temperature=0,
        stream=True, stream_options={"include_usage": True},
    )  # fmt: skip
    pieces, usage = [], None
    async for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
        if chunk.usage:
            usage = chunk.usage
    assert "".join(pieces) == choice.text
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens


async def test_n_sampled_chat_choices_differ(client: AsyncOpenAI) -> None:
    answer = await client.chat.completions.create(
        model="reference-llava",
        messages=[{"role": "user", "content": "Say anything."}],
        n=3,
        max_tokens=12,
        temperature=1.0,
    )
    texts = [c.message.content for c in answer.choices]
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert all(texts) and len(set(texts)) > 1  # distinct seeds, distinct samples
    stream = await client.chat.completions.create(
        model="reference-llava",
        messages=[{"role": "user", "content": "Say anything."}],
        n=3, max_tokens=6, temperature=0, stream=True,
    )  # fmt: skip
    streamed: dict[int, str] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            streamed[choice.index] = streamed.get(choice.index, "") + (choice.delta.content or "")
    assert sorted(streamed) == [0, 1, 2]
    assert len(set(streamed.values())) == 1  # greedy: every choice the same text


async def test_two_identical_sampled_requests_differ_without_a_seed(client: AsyncOpenAI) -> None:
    """TensorRT-LLM seeds every request 0 by default; the gateway draws a fresh seed."""
    ask = {"model": "reference-llava", "messages": [{"role": "user", "content": "Go on."}],
           "max_tokens": 12, "temperature": 1.0}  # fmt: skip
    first = await client.chat.completions.create(**ask)
    second = await client.chat.completions.create(**ask)
    assert first.choices[0].message.content != second.choices[0].message.content
