"""The official OpenAI SDK's Responses API against the gateway in front of the real co-launched
Triton: an image and text in, ``output_text`` out; ``responses.stream`` and its final response
equal to the non-streamed one under greedy sampling; a continuation that reuses the first
turn's image from the KV cache; GET, input_items and DELETE."""

from __future__ import annotations

import base64

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.responses import Response

from tests.e2e.conftest import make_image

pytestmark = pytest.mark.e2e

IMAGE = "data:image/png;base64," + base64.b64encode(make_image(7, (256, 256))).decode()


@pytest.fixture
def client(gateway_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)


def image_question(text: str = "What is in this picture?") -> list[dict]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": text},
                {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
            ],
        }
    ]


async def test_an_image_and_text_give_output_text(client: AsyncOpenAI) -> None:
    raw = await client.responses.with_raw_response.create(
        model="reference-llava", input=image_question(), max_output_tokens=8, temperature=0
    )
    response = Response.model_validate(raw.http_response.json())  # the SDK's own schema
    assert response.output_text
    assert response.status in ("completed", "incomplete")
    assert response.usage is not None and response.usage.input_tokens > 576  # the image's
    assert 0 < response.usage.output_tokens <= 8


async def test_the_stream_yields_openais_events_and_the_same_final_response(
    client: AsyncOpenAI,
) -> None:
    kwargs = {
        "model": "reference-llava-onevision",
        "input": image_question(),
        "max_output_tokens": 12,
        "temperature": 0,
        "instructions": "Answer in one sentence.",
    }
    created = await client.responses.create(**kwargs)
    kinds: list[str] = []
    numbers: list[int] = []
    deltas: list[str] = []
    async with client.responses.stream(**kwargs) as stream:
        async for event in stream:
            kinds.append(event.type)
            numbers.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            if event.type in ("response.completed", "response.incomplete"):
                # The SDK's get_final_response() takes only response.completed (as against
                # OpenAI: openai-python#3538), and 12 tokens may cut this answer.
                final = event.response
    ending = "response.incomplete" if created.status == "incomplete" else "response.completed"
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"} and len(deltas) > 1
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        ending,
    ]
    assert numbers == list(range(len(numbers)))
    assert final.output_text == "".join(deltas) == created.output_text
    assert final.status == created.status and final.usage and created.usage
    assert final.usage.input_tokens == created.usage.input_tokens
    assert final.usage.output_tokens == created.usage.output_tokens  # (the second one hits
    # the first one's KV cache: their cached_tokens differ)


async def test_a_continuation_reuses_the_first_turns_image(client: AsyncOpenAI) -> None:
    first = await client.responses.create(
        model="reference-llava", input=image_question(), max_output_tokens=4, temperature=0
    )
    second = await client.responses.create(
        model="reference-llava",
        input="And what colours does it have?",
        previous_response_id=first.id,
        max_output_tokens=4,
        temperature=0,
    )
    assert second.previous_response_id == first.id
    assert second.usage is not None and first.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens >= 576, "the image's prefix is reused"


async def test_a_stored_response_is_read_listed_and_deleted(client: AsyncOpenAI) -> None:
    created = await client.responses.create(
        model="reference-llava", input=image_question(), max_output_tokens=3, temperature=0
    )
    fetched = await client.responses.retrieve(created.id)
    assert fetched.id == created.id and fetched.output_text == created.output_text
    items = await client.responses.input_items.list(created.id)
    (message,) = items.data
    assert message.type == "message" and message.role == "user"
    assert [part.type for part in message.content] == ["input_text", "input_image"]
    await client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(created.id)
