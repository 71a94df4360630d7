"""The OpenAI SDK against the gateway in front of NVIDIA's llmapi Triton model (the reference
``reference_qwen2_5_vl``: NVIDIA's contract over a tiny random Qwen2.5-VL) in the real Triton.

The gateway renders text prompts with the model's own chat template, fetches and checks images
and sends them as ``data:`` URIs; the model applies its template to image requests itself.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.conftest import MediaServer

pytestmark = pytest.mark.e2e

MODEL = "reference-qwen2.5-vl"


@pytest.fixture
def client(gateway_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)


def images(media_server: MediaServer, *names: str) -> list[dict]:
    parts = [{"type": "image_url", "image_url": {"url": media_server.url(n)}} for n in names]
    return [{"role": "user", "content": [{"type": "text", "text": "Describe them."}, *parts]}]


async def test_one_image_streamed_equals_non_streamed(
    client: AsyncOpenAI, media_server: MediaServer
) -> None:
    kwargs = {
        "model": MODEL,
        "messages": images(media_server, "red.png"),
        "max_tokens": 8,
        "seed": 5,
        "temperature": 0.9,
    }
    full = await client.chat.completions.create(**kwargs)
    stream = await client.chat.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}
    )
    pieces, usage = [], None
    async for chunk in stream:
        usage = chunk.usage or usage
        pieces += [choice.delta.content or "" for choice in chunk.choices]
    assert full.choices[0].message.content
    assert "".join(pieces) == full.choices[0].message.content
    assert full.choices[0].finish_reason in ("stop", "length")
    assert usage is not None and usage.completion_tokens == full.usage.completion_tokens


async def test_two_images_and_the_repeat_reuses_their_blocks(
    client: AsyncOpenAI, media_server: MediaServer
) -> None:
    kwargs = {"model": MODEL, "messages": images(media_server, "blue.jpg", "green.png")}
    first = await client.chat.completions.create(**kwargs, max_tokens=6, temperature=0)
    again = await client.chat.completions.create(**kwargs, max_tokens=6, temperature=0)
    assert again.choices[0].message.content == first.choices[0].message.content
    details = again.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens and details.cached_tokens % 32 == 0
    stream = await client.chat.completions.create(**kwargs, max_tokens=6, stream=True)
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert streamed


async def test_responses_with_an_input_image(
    client: AsyncOpenAI, media_server: MediaServer
) -> None:
    response = await client.responses.create(
        model=MODEL,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": media_server.url("red.png")},
                ],
            }
        ],
        max_output_tokens=6,
    )
    assert response.status in ("completed", "incomplete")
    assert response.output_text


async def test_text_multi_turn_with_a_system_message(client: AsyncOpenAI) -> None:
    messages = [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "Again?"},
    ]
    answer = await client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=5, temperature=0
    )
    assert answer.choices[0].message.content
    # The template's rendering counted with the model's tokenizer: far more than the words.
    assert answer.usage.prompt_tokens > 20
    assert answer.choices[0].finish_reason in ("stop", "length")


async def test_a_forced_tool_call_is_refused_naming_guided_decoding(client: AsyncOpenAI) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Look it up."}],
            tools=[tool],
            tool_choice={"type": "function", "function": {"name": "lookup"}},
        )
    assert "guided decoding" in refused.value.message
    assert refused.value.body["param"] == "tool_choice"


async def generated(triton: EmbeddedTriton) -> float:
    async with httpx.AsyncClient(trust_env=False) as http:
        text = (await http.get(f"http://127.0.0.1:{triton.metrics_port}/metrics")).text
    pattern = r'^mmgw_reference_generated_tokens_total\{model="reference_qwen2_5_vl"\} (\S+)$'
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_a_client_that_leaves_stops_generation_within_a_second(
    gateway_url: str, embedded_triton: EmbeddedTriton
) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell me everything."}],
        "max_tokens": 3000,
        "temperature": 1.0,
        "stream": True,
    }
    before = await generated(embedded_triton)
    async with (
        httpx.AsyncClient(base_url=gateway_url, timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        chunks = 0
        async for line in response.aiter_lines():
            chunks += line.startswith("data: ") and '"content"' in line
            if chunks >= 8:
                break
    await asyncio.sleep(1.0)  # the model checks for cancelled requests every 100 ms
    settled = await generated(embedded_triton)
    await asyncio.sleep(1.0)
    assert await generated(embedded_triton) == settled, "the model kept generating"
    assert settled - before < 3000
