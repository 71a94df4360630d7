"""Every media refusal through the gateway: a 400 with its own code naming the part, nothing
sent to Triton, and the service keeps serving. The default gateway runs with the SSRF guard
fully on (no test switch); "strict" adds tight video and decoding-time limits."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import AsyncIterator

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.fakes.app import (
    assert_openai_error,
    chat,
    data_url,
    http_client,
    image_part,
    png,
)
from tests.fakes.triton import FakeTriton
from tests.gateway.media.samples import encode_video
from tests.gateway.media.test_fetch_ssrf import SSRF_URLS
from tests.gateway.routes.gateways import Gateways

URL = "/v1/chat/completions"


def ask(part: dict, model: str = "fake-llava") -> dict:
    return chat([part, {"type": "text", "text": "What is this?"}], model, max_tokens=2)


def video_part(url: str) -> dict:
    return {"type": "video_url", "video_url": {"url": url}}


def png_bomb(width: int = 50_000, height: int = 50_000) -> bytes:
    """A valid 1x1 PNG whose header then claims ``width`` x ``height`` (a few hundred bytes)."""
    out = io.BytesIO()
    Image.new("RGB", (1, 1)).save(out, "PNG")
    data = bytearray(out.getvalue())
    ihdr = struct.pack(">II", width, height) + data[24:29]
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return bytes(data)


def slow_png() -> bytes:
    """35 megapixels of flat colour: 150 kB on the wire, most of a second to decode and
    resize, so a tight per-item budget runs out."""
    out = io.BytesIO()
    Image.fromarray(np.full((5000, 7000, 3), 90, np.uint8)).save(out, "PNG", compress_level=1)
    return out.getvalue()


@pytest.fixture(autouse=True)
def nothing_refused_reaches_triton(fake: FakeTriton):
    yield
    assert fake.requests == [], "a refused request reached Triton"


async def assert_still_serving(client: httpx.AsyncClient, fake: FakeTriton) -> None:
    ok = await client.post(URL, json=ask(image_part(data_url(png(7)))))
    assert ok.status_code == 200, ok.text
    assert [r.model for r in fake.requests] == ["ensemble"]
    fake.requests.clear()


@pytest.fixture
async def strict(gateways: Gateways, fake: FakeTriton) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client((await gateways.get("strict")).app) as client:
        yield client


@pytest.mark.parametrize(
    "template", [u for u in SSRF_URLS if "rebind.test" not in u], ids=lambda u: u[:48]
)
async def test_ssrf_matrix_through_the_gateway(http: httpx.AsyncClient, template: str) -> None:
    url = template.format(port=9)
    error = assert_openai_error(await http.post(URL, json=ask(image_part(url))), 400)
    assert error["code"] == "invalid_image_url"
    assert error["param"] == "messages[0].content[0]"
    if "127.0.0.1" not in url and "::1" not in url:
        assert "127.0.0.1" not in error["message"]  # never what a name resolved to


async def test_video_url_refusals_say_video(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    body = ask(video_part("http://169.254.169.254/v.mp4"), "fake-onevision")
    assert_openai_error(await http.post(URL, json=body), 400, "invalid_video_url")
    await assert_still_serving(http, fake)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("data:image/png;base64", "no ','"),
        ("data:image/png;base64,@@@@", "not valid base64"),
        ("ftp://example.com/a.png", ""),
    ],
)
async def test_malformed_image_urls(http: httpx.AsyncClient, url: str, words: str) -> None:
    error = assert_openai_error(await http.post(URL, json=ask(image_part(url))), 400)
    assert error["code"] == "invalid_image_url" and words in error["message"]
    assert error["param"] == "messages[0].content[0]"


async def test_pixel_bomb(http: httpx.AsyncClient) -> None:
    body = ask(image_part(data_url(png_bomb())))
    error = assert_openai_error(await http.post(URL, json=body), 400, "media_too_large")
    assert "50000x50000" in error["message"] and "limit of 40 megapixels" in error["message"]


async def test_truncated_and_empty_and_foreign(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    jpeg = png(3, (400, 300), "JPEG")
    cases = [
        (jpeg[: len(jpeg) // 2], "image/jpeg", "invalid_media"),  # truncated
        (b"", "image/png", "invalid_media"),  # empty
        (b"this is plain text, not a picture\n" * 20, "image/png", "unsupported_media_type"),
    ]
    for data, media_type, code in cases:
        body = ask(image_part(data_url(data, media_type)))
        error = assert_openai_error(await http.post(URL, json=body), 400, code)
        assert "image 1 of 1" in error["message"]
        assert "Traceback" not in error["message"] and "PIL" not in error["message"]
    await assert_still_serving(http, fake)


async def test_bytes_that_are_not_an_image(http: httpx.AsyncClient) -> None:
    text = b"this is plain text, not a picture\n" * 20
    response = await http.post(URL, json=ask(image_part(data_url(text))))
    assert_openai_error(response, 400, "unsupported_media_type")


async def test_the_failing_part_is_named_among_several(http: httpx.AsyncClient) -> None:
    good, bad = data_url(png(1)), data_url(b"GIF89a-not-really", "image/gif")
    content = [image_part(good), {"type": "text", "text": "and"}, image_part(bad)]
    error = assert_openai_error(await http.post(URL, json=chat(content)), 400)
    assert error["param"] == "messages[0].content[2]" and "image 2 of 2" in error["message"]


async def test_video_with_more_frames_than_allowed(
    strict: httpx.AsyncClient, fake: FakeTriton
) -> None:
    clip = data_url(encode_video(frames=40), "video/mp4")
    body = ask(video_part(clip), "fake-onevision")
    error = assert_openai_error(await strict.post(URL, json=body), 400, "media_too_large")
    assert "40 frames, over the limit of 30 frames" in error["message"]
    await assert_still_serving(strict, fake)


async def test_decoding_over_its_budget_is_abandoned(
    strict: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = ask(image_part(data_url(slow_png())))
    error = assert_openai_error(await strict.post(URL, json=body), 400, "media_timeout")
    assert "longer than the 0.25 s" in error["message"]
    await assert_still_serving(strict, fake)  # a fresh worker took the killed one's place


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_audio", "input_audio": {"format": "wav", "data": "UklGRg=="}},
        {"type": "audio_url", "audio_url": {"url": "http://127.0.0.1:9/long.mp3"}},
    ],
)
async def test_audio_to_a_model_without_audio(http: httpx.AsyncClient, part: dict) -> None:
    """No served chat family takes audio: refused before any fetch or decode. (The decoder's
    own duration limit is tested in tests/gateway/{media/test_audio,pipeline/test_media}.py.)"""
    for model in ("fake-llava", "fake-onevision"):
        error = assert_openai_error(await http.post(URL, json=ask(part, model)), 400)
        assert error["code"] == "unsupported_content_part" and "audio" in error["message"]


async def test_video_to_a_model_without_video(http: httpx.AsyncClient) -> None:
    clip = data_url(encode_video(frames=4), "video/mp4")
    error = assert_openai_error(await http.post(URL, json=ask(video_part(clip))), 400)
    assert error["code"] == "unsupported_content_part"


async def test_an_image_and_a_video_in_one_request(http: httpx.AsyncClient) -> None:
    clip = data_url(encode_video(frames=4), "video/mp4")
    content = [image_part(data_url(png(1))), video_part(clip)]
    error = assert_openai_error(
        await http.post(URL, json=chat(content, "fake-onevision")), 400, "unsupported_content_part"
    )
    assert "mixes image and video" in error["message"]


async def test_images_to_a_speech_model(http: httpx.AsyncClient) -> None:
    body = ask(image_part(data_url(png(1))), "fake-whisper")
    error = assert_openai_error(await http.post(URL, json=body), 400, "unsupported_content_part")
    assert error["param"] == "messages[0].content[0]"


async def test_too_many_items_and_bad_sampling(http: httpx.AsyncClient) -> None:
    url = data_url(png(1, (32, 32)))
    many = ask(image_part(url))
    many["messages"][0]["content"] = [image_part(url)] * 9 + [{"type": "text", "text": "hi"}]
    assert_openai_error(await http.post(URL, json=many), 400, "too_many_media_items")
    clip = data_url(encode_video(frames=4), "video/mp4")
    body = ask(video_part(clip), "fake-onevision")
    body["media_io_kwargs"] = {"video": {"num_frames": 1000}}
    error = assert_openai_error(await http.post(URL, json=body), 400)
    assert error["param"] == "media_io_kwargs.video.num_frames"
    body["media_io_kwargs"] = {"video": {"frames": 4}}  # a typo is refused, not ignored
    assert_openai_error(await http.post(URL, json=body), 400)
    body["media_io_kwargs"] = {"video": {"fps": 1000}}
    error = assert_openai_error(await http.post(URL, json=body), 400, "invalid_request")
    assert error["param"] == "media_io_kwargs.video.fps"


async def test_two_videos_are_too_many(http: httpx.AsyncClient) -> None:
    """No family's tensor carries two videos (video_bytes_input is [1, frames, H, W, 3]):
    refused before any fetch, saying why."""
    clip = data_url(encode_video(frames=4), "video/mp4")
    body = chat([video_part(clip), {"type": "text", "text": "and"}, video_part(clip)])
    body["model"] = "fake-onevision"
    error = assert_openai_error(await http.post(URL, json=body), 400, "too_many_media_items")
    assert error["param"] == "messages"
    assert error["message"] == (
        "this request has 2 videos; model 'fake-onevision' takes one video per request: its "
        "video tensor (video_bytes_input) carries the frames of one video"
    )


async def test_two_audio_clips_are_too_many(http: httpx.AsyncClient) -> None:
    """Whisper transcribes one clip per request: two are refused before decoding either."""
    clip = {"type": "input_audio", "input_audio": {"format": "wav", "data": "UklGRg=="}}
    body = chat([clip, {"type": "audio_url", "audio_url": {"url": "http://127.0.0.1:9/a"}}])
    body["model"] = "fake-whisper"
    error = assert_openai_error(await http.post(URL, json=body), 400, "too_many_media_items")
    assert error["param"] == "messages"
    assert error["message"] == (
        "this request has 2 audio clips; a chat request to a speech model takes one: it "
        "answers with one transcript, of one clip (its encoder reads that clip's 30 s windows)"
    )


async def test_images_to_a_deployment_without_an_image_input_are_refused_before_the_fetch(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """fake-minimal's Triton model declares no image tensor: its capabilities say so, and the
    request is refused as such before the URL is looked at (the SSRF guard would refuse it)."""
    body = ask(image_part("http://169.254.169.254/a.png"), "fake-minimal")
    error = assert_openai_error(await http.post(URL, json=body), 400, "images_not_supported")
    assert "cannot take images" in error["message"]
    await assert_still_serving(http, fake)
