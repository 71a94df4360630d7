"""``upstream.stream_client``: the token streams read by grpclib on the event loop ("h2") give
the same answers as grpc.aio's ("grpcio"), and a client that leaves still cancels generation in
Triton; "auto" (the default: grpclib for text, grpc.aio for requests with a large tensor)
answers both kinds as grpc.aio does.

A second gateway with only the LLaVA reference model, in front of the session's Triton.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator

import httpx
import numpy as np
import pytest
from PIL import Image

from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.conftest import e2e_settings
from tests.e2e.test_cancellation import LONG, assert_generation_stops, generated_tokens
from tests.live_gateway import serving

pytestmark = pytest.mark.e2e


def _llava_gateway(embedded_triton: EmbeddedTriton, stream_client: str) -> AsyncIterator[str]:
    settings = e2e_settings(embedded_triton)
    llava = [model for model in settings.models if model.id == "reference-llava"]
    upstream = settings.upstream.model_copy(update={"stream_client": stream_client})
    return serving(settings.model_copy(update={"models": llava, "upstream": upstream}))


@pytest.fixture(scope="module")
async def h2_gateway_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    async with _llava_gateway(embedded_triton, "h2") as url:
        yield url


@pytest.fixture(scope="module")
async def grpcio_gateway_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    async with _llava_gateway(embedded_triton, "grpcio") as url:
        yield url


def photo_url(side: int) -> str:
    pixels = np.random.default_rng(side).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()


async def streamed_text(url: str, body: dict[str, object]) -> str:
    pieces = []
    async with (
        httpx.AsyncClient(timeout=120, trust_env=False) as http,
        http.stream("POST", f"{url}/v1/chat/completions", json=body | {"stream": True}) as reply,
    ):
        assert reply.status_code == 200, await reply.aread()
        async for line in reply.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line.removeprefix("data: "))
                assert "error" not in chunk, chunk
                pieces += [c["delta"].get("content") or "" for c in chunk["choices"]]
    return "".join(pieces)


async def test_both_stream_clients_give_the_same_answer_with_an_image(
    h2_gateway_url: str, grpcio_gateway_url: str
) -> None:
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": photo_url(1024)}}]  # fmt: skip
    body = {
        "model": "reference-llava",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 24,
        "temperature": 0,
    }
    over_h2 = await streamed_text(h2_gateway_url, body)
    assert over_h2  # the image tensor went out over h2 and tokens came back
    assert over_h2 == await streamed_text(grpcio_gateway_url, body)


async def test_closing_a_stream_read_over_h2_cancels_generation(
    h2_gateway_url: str, embedded_triton: EmbeddedTriton
) -> None:
    before = await generated_tokens(embedded_triton)
    async with (
        httpx.AsyncClient(base_url=h2_gateway_url, timeout=60, trust_env=False) as http,
        http.stream("POST", "/v1/chat/completions", json=LONG | {"stream": True}) as response,
    ):
        assert response.status_code == 200
        chunks = 0
        async for line in response.aiter_lines():
            if line.startswith("data: ") and '"content"' in line:
                chunks += 1
            if chunks >= 3:
                break
    await assert_generation_stops(embedded_triton, before)


async def test_auto_answers_text_and_images_as_grpcio_does(
    gateway_url: str, grpcio_gateway_url: str
) -> None:
    text = {"model": "reference-llava", "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "Say something."}]}  # fmt: skip
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": photo_url(336)}}]  # fmt: skip
    image = text | {"messages": [{"role": "user", "content": content}]}
    for body in (text, image):  # over grpclib, then over grpc.aio (a 677 kB tensor)
        over_auto = await streamed_text(gateway_url, body)  # the session's: the default
        assert over_auto
        assert over_auto == await streamed_text(grpcio_gateway_url, body)
