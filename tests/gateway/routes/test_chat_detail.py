"""``detail`` per family and the image-token budgets, through the gateway in front of the fake
Triton: what reaches the deployment, the content id, and the usage's image tokens."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.families.llava_onevision import anyres_features
from tests.fakes.app import FakeGateway, assert_openai_error, chat, data_url, http_client, png
from tests.fakes.triton import FakeTriton

URL = "/v1/chat/completions"
PICTURE = data_url(png(5, (1000, 800)))


def ask(detail: str | None, model: str = "fake-onevision", url: str = PICTURE) -> dict[str, Any]:
    image: dict[str, Any] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    part = {"type": "image_url", "image_url": image}
    return chat([part, {"type": "text", "text": "What is this?"}], model, max_tokens=2)


async def sent(http: httpx.AsyncClient, fake: FakeTriton, body: dict[str, Any]) -> tuple:
    response = await http.post(URL, json=body)
    assert response.status_code == 200, response.text
    request = fake.requests[-1]
    details = response.json()["usage"]["prompt_tokens_details"]
    return request, details


async def test_low_detail_sends_fewer_pixels_and_costs_fewer_image_tokens(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    low, low_usage = await sent(http, fake, ask("low"))
    high, high_usage = await sent(http, fake, ask("high"))
    assert low.inputs["image_bytes_input"].shape == (1, 1, 307, 384, 3)
    assert high.inputs["image_bytes_input"].shape == (1, 1, 800, 1000, 3)
    # The usage counts what was sent: the processor's count for the size that went out.
    assert low_usage["image_tokens"] == anyres_features(307, 384)
    assert high_usage["image_tokens"] == anyres_features(800, 1000)
    assert low_usage["image_tokens"] < high_usage["image_tokens"]
    # Different pixels, different content: the KV cache of one is not the other's.
    assert low.scalar("prompt_table_extra_id") != high.scalar("prompt_table_extra_id")


@pytest.mark.parametrize("detail", ["auto", "original", None])
async def test_auto_and_original_take_the_full_resolution(
    http: httpx.AsyncClient, fake: FakeTriton, detail: str | None
) -> None:
    high, _ = await sent(http, fake, ask("high"))
    other, usage = await sent(http, fake, ask(detail))
    assert other.inputs["image_bytes_input"].shape == high.inputs["image_bytes_input"].shape
    assert other.scalar("prompt_table_extra_id") == high.scalar("prompt_table_extra_id")
    assert usage["image_tokens"] == anyres_features(800, 1000)


async def test_detail_changes_nothing_where_the_family_has_one_resolution(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    low, low_usage = await sent(http, fake, ask("low", "fake-llava"))
    high, high_usage = await sent(http, fake, ask("high", "fake-llava"))
    assert (low.inputs["image_input"] == high.inputs["image_input"]).all()
    assert low.scalar("prompt_table_extra_id") == high.scalar("prompt_table_extra_id")
    assert low_usage["image_tokens"] == high_usage["image_tokens"] == 576


@pytest.fixture(scope="module")
async def budgeted(session_fake: FakeTriton) -> AsyncIterator[FakeGateway]:
    from tests.fakes.app import start_gateway

    gateway = await start_gateway(session_fake, media={"max_image_tokens_per_request": 2000})
    yield gateway
    await gateway.aclose()


async def test_an_image_over_the_token_budget_is_refused_and_low_detail_fits(
    budgeted: FakeGateway, fake: FakeTriton
) -> None:
    async with http_client(budgeted.app) as http:
        error = assert_openai_error(
            await http.post(URL, json=ask("high")), 400, "image_token_budget_exceeded"
        )
        assert str(anyres_features(800, 1000)) in error["message"]
        assert (
            "at most 2000" in error["message"]
            and "max_image_tokens_per_request" in error["message"]
        )
        assert not fake.requests
        ok = await http.post(URL, json=ask("low"))
        assert ok.status_code == 200, ok.text


async def test_an_image_whose_header_is_over_the_budget_is_refused_before_decoding(
    budgeted: FakeGateway, fake: FakeTriton
) -> None:
    # A PNG header claiming 4000 x 3000 and nothing a decoder could read after it: refused by
    # its header, so the broken body is never decoded (that would be invalid_media).
    header = bytearray(png(1, (4000, 3000)))[:33] + b"\x00" * 64
    async with http_client(budgeted.app) as http:
        error = assert_openai_error(
            await http.post(URL, json=ask("high", url=data_url(bytes(header)))),
            400,
            "image_token_budget_exceeded",
        )
    assert "by its header, before decoding" in error["message"]
    assert error["param"] == "messages[0].content[0]"


async def test_streamed_usage_carries_the_image_tokens_in_chat_and_responses(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = ask("low") | {"stream": True, "stream_options": {"include_usage": True}}
    async with http.stream("POST", URL, json=body) as response:
        lines = [line async for line in response.aiter_lines() if line.startswith("data: {")]
    usage = json.loads(lines[-1][6:])["usage"]
    assert usage["prompt_tokens_details"]["image_tokens"] == anyres_features(307, 384)
    image = {"type": "input_image", "image_url": PICTURE, "detail": "low"}
    request = {
        "model": "fake-onevision",
        "stream": True,
        "max_output_tokens": 2,
        "input": [{"role": "user", "content": [image, {"type": "input_text", "text": "?"}]}],
    }
    async with http.stream("POST", "/v1/responses", json=request) as response:
        events = [line async for line in response.aiter_lines() if line.startswith("data: {")]
    final = json.loads(events[-1][6:])
    assert final["type"] in ("response.completed", "response.incomplete")
    details = final["response"]["usage"]["input_tokens_details"]
    assert details["image_tokens"] == anyres_features(307, 384)
