"""The official OpenAI SDK against the gateway in front of the real co-launched Triton."""

from __future__ import annotations

import base64

import httpx
import pytest
from openai import AsyncOpenAI

from tests.e2e.conftest import MediaServer

pytestmark = pytest.mark.e2e

QUESTION = "What is in these pictures?"


@pytest.fixture
def client(gateway_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)


# Images one request may carry: LLaVA's engine takes several; NVIDIA's OneVision
# preprocessing reads one image_bytes_input image per request (docs/families.md).
IMAGES = {"reference-llava": ["red.png", "blue.jpg"], "reference-llava-onevision": ["blue.jpg"]}


def image_message(media_server: MediaServer, model: str) -> list[dict]:
    images = [
        {"type": "image_url", "image_url": {"url": media_server.url(name)}}
        for name in IMAGES[model]
    ]
    return [{"role": "user", "content": [{"type": "text", "text": QUESTION}, *images]}]


@pytest.mark.parametrize("model", ["reference-llava", "reference-llava-onevision"])
async def test_streamed_text_joined_equals_non_streamed(
    client: AsyncOpenAI, media_server: MediaServer, model: str
) -> None:
    messages = image_message(media_server, model)
    kwargs = {"model": model, "messages": messages, "max_tokens": 12, "seed": 7, "temperature": 0.9}
    full = await client.chat.completions.create(**kwargs)
    stream = await client.chat.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}
    )
    pieces: list[str] = []
    finish_reasons: list[str] = []
    usage = None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            if choice.finish_reason:
                finish_reasons.append(choice.finish_reason)
    assert full.choices[0].message.content
    assert "".join(pieces) == full.choices[0].message.content
    assert len([p for p in pieces if p]) > 1, "the answer must arrive in several chunks"
    assert finish_reasons == [full.choices[0].finish_reason]
    assert full.choices[0].finish_reason in ("stop", "length")
    assert usage is not None and usage.completion_tokens == full.usage.completion_tokens
    assert full.usage.prompt_tokens > 2 * 576 if model == "reference-llava" else True
    assert full.usage.completion_tokens <= 12


async def test_max_tokens_gives_finish_reason_length(client: AsyncOpenAI) -> None:
    response = await client.chat.completions.create(
        model="reference-llava",
        messages=[{"role": "user", "content": "Tell me a long story."}],
        max_tokens=3,
        temperature=0,
        stop=None,
        extra_body={"top_k": 1},
    )
    # The tiny model may emit EOS early; if it used all 3 tokens the reason must be length.
    usage = response.usage
    assert usage.completion_tokens <= 3
    if usage.completion_tokens == 3:
        assert response.choices[0].finish_reason == "length"


async def test_multi_turn_conversation_is_served(
    client: AsyncOpenAI, media_server: MediaServer
) -> None:
    response = await client.chat.completions.create(
        model="reference-llava-onevision",
        messages=[
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": media_server.url("green.png")}},
                    {"type": "text", "text": "Describe it."},
                ],
            },
            {"role": "assistant", "content": "A green square."},
            {"role": "user", "content": "And the colour again?"},
        ],
        max_tokens=5,
        temperature=0,
    )
    assert response.choices[0].message.role == "assistant"
    assert response.usage.prompt_tokens > 729


async def test_data_url_image(gateway_url: str, media_server: MediaServer) -> None:
    png = media_server.files["green.png"][0]
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    async with httpx.AsyncClient(timeout=120) as http:
        response = await http.post(
            f"{gateway_url}/v1/chat/completions",
            json={
                "model": "reference-llava",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is this?"},
                            {"type": "image_url", "image_url": {"url": data_url}},
                        ],
                    }
                ],
                "max_tokens": 4,
            },
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["usage"]["prompt_tokens"] > 576
    assert response.headers["x-request-id"]


async def test_repeated_image_reuses_cached_prefix_and_other_image_does_not(
    client: AsyncOpenAI, media_server: MediaServer
) -> None:
    def ask(image: str, question: str) -> dict:
        return {
            "model": "reference-llava",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": media_server.url(image)}},
                        {"type": "text", "text": question},
                    ],
                }
            ],
            "max_tokens": 2,
            "temperature": 0,
        }

    first = await client.chat.completions.create(**ask("green.png", "Colour?"))
    again = await client.chat.completions.create(**ask("green.png", "Shape, please?"))
    other = await client.chat.completions.create(**ask("blue.jpg", "Colour?"))
    cached_again = again.usage.prompt_tokens_details.cached_tokens
    cached_other = other.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens > 576
    assert cached_again >= 576, "the image's prefix must be reused"
    assert cached_other < 16, "a different image must not reuse another image's blocks"
