"""Video and content identity end to end: the real gateway in front of the real Triton."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
from openai import AsyncOpenAI
from PIL import Image

from tests.e2e.conftest import MediaServer
from tests.gateway.media.frame_lists import frame_images, frame_list_url
from tests.gateway.media.samples import encode_video

pytestmark = pytest.mark.e2e

ONEVISION = "reference-llava-onevision"


@pytest.fixture(scope="module")
def clips(media_server: MediaServer) -> MediaServer:
    media_server.files["clip.mp4"] = (encode_video(frames=24, size=(64, 48)), "video/mp4")
    return media_server


def video_request(url: str, num_frames: int | None = None, model: str = ONEVISION) -> dict:
    body: dict = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": url}},
                    {"type": "text", "text": "What happens in this video?"},
                ],
            }
        ],
        "max_tokens": 4,
        "temperature": 0,
    }
    if num_frames is not None:
        body["media_io_kwargs"] = {"video": {"num_frames": num_frames}}
    return body


async def test_video_chat_to_onevision(gateway_url: str, clips: MediaServer) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        two = await http.post("/v1/chat/completions", json=video_request(clips.url("clip.mp4"), 2))
        four = await http.post("/v1/chat/completions", json=video_request(clips.url("clip.mp4"), 4))
    assert two.status_code == 200, two.text
    assert four.status_code == 200, four.text
    assert two.json()["choices"][0]["message"]["role"] == "assistant"
    tokens_two = two.json()["usage"]["prompt_tokens"]
    tokens_four = four.json()["usage"]["prompt_tokens"]
    per_frame = (tokens_four - tokens_two) / 2
    assert per_frame >= 4, "each sampled frame reaches the model as visual features"
    # usage's video_tokens are what the family sent: 196 pooled features a frame and a newline,
    # and the prompt grew by exactly their difference.
    video_two = two.json()["usage"]["prompt_tokens_details"]["video_tokens"]
    video_four = four.json()["usage"]["prompt_tokens_details"]["video_tokens"]
    assert (video_two, video_four) == (2 * 196 + 1, 4 * 196 + 1)
    assert tokens_four - tokens_two == video_four - video_two


async def test_webm_data_url_video_with_the_openai_sdk(gateway_url: str) -> None:
    webm = encode_video(frames=10, codec="libvpx-vp9")
    url = "data:video/webm;base64," + base64.b64encode(webm).decode()
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="x", max_retries=0, timeout=120)
    body = video_request(url)
    stream = await client.chat.completions.create(
        model=body["model"],
        messages=body["messages"],
        max_tokens=4,
        stream=True,
        extra_body={"media_io_kwargs": {"video": {"num_frames": 3, "fps": 2}}},
    )
    finish = [c.choices[0].finish_reason async for c in stream if c.choices]
    assert finish[-1] in ("stop", "length")


@pytest.mark.parametrize(
    "url",
    [
        "data:video/x-msvideo;base64,"
        + base64.b64encode(encode_video(frames=12, codec="mpeg4", container="avi")).decode(),
        frame_list_url(frame_images(12)),
    ],
    ids=["mpeg4-avi", "vllm-frame-list"],
)
async def test_avi_and_frame_list_videos_reach_the_model(gateway_url: str, url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        two = await http.post("/v1/chat/completions", json=video_request(url, 2))
        four = await http.post("/v1/chat/completions", json=video_request(url, 4))
    assert two.status_code == 200, two.text
    assert four.status_code == 200, four.text
    per_frame = (four.json()["usage"]["prompt_tokens"] - two.json()["usage"]["prompt_tokens"]) / 2
    assert per_frame >= 4, "each sampled frame reaches the model as visual features"


def _pixels_as(fmt: str, **save: object) -> bytes:
    rng = np.random.default_rng(42)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (200, 240, 3), dtype=np.uint8)).save(out, fmt, **save)
    return out.getvalue()


async def test_the_same_image_by_url_and_by_data_url_reuses_the_cache(
    gateway_url: str, media_server: MediaServer
) -> None:
    """The KV-reuse id comes from the image's validated bytes (and the model's processing), not
    from where they came from: a PNG by URL and the same PNG as a data: URL share Triton's
    cached prefix. The same pixels in another encoding (a lossless WebP) get an id of their own:
    no reuse, and never a wrong one (docs/triton-contract.md)."""
    png = _pixels_as("PNG")
    media_server.files["same.png"] = (png, "image/png")
    inline = base64.b64encode(png).decode()
    webp = base64.b64encode(_pixels_as("WEBP", lossless=True)).decode()

    def ask(url: str, question: str) -> dict:
        content = [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": question},
        ]
        return {
            "model": "reference-llava",
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 2,
            "temperature": 0,
        }

    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        first = await http.post(
            "/v1/chat/completions", json=ask(media_server.url("same.png"), "A?")
        )
        again = await http.post(
            "/v1/chat/completions", json=ask(f"data:image/png;base64,{inline}", "B?")
        )
        other = await http.post(
            "/v1/chat/completions", json=ask(f"data:image/webp;base64,{webp}", "C?")
        )
    for reply in (first, again, other):
        assert reply.status_code == 200, reply.text
    cached = again.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 576, "the same image bytes must reuse the image's cached prefix"
    not_reused = other.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert not_reused < 576, "another encoding has an id of its own"
