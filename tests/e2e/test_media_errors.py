"""Every media refusal through the real gateway: a 400 with its own code, and the service
keeps serving. A second gateway runs with the SSRF guard fully on (no test switch) and tight
limits, in front of the same Triton."""

from __future__ import annotations

import asyncio
import base64
import io
import struct
import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest
import uvicorn
from PIL import Image

from gateway.app import create_app
from gateway.config import AudioSettings, DecodeSettings, MediaSettings, VideoSettings
from gateway.triton.embedded import EmbeddedTriton, free_loopback_port
from tests.e2e.conftest import MediaServer, e2e_settings, make_image
from tests.e2e.test_errors import assert_openai_error
from tests.gateway.media.samples import encode_video
from tests.gateway.media.test_fetch_ssrf import SSRF_URLS

pytestmark = pytest.mark.e2e

CAP = 20 * 1024 * 1024  # the default [media] max_bytes


def chat(part: dict, model: str = "reference-llava") -> dict:
    content = [part, {"type": "text", "text": "What is this?"}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 2}


def image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


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


class _Liars(BaseHTTPRequestHandler):
    """Bodies over the cap: with no length, with an inflated one, with an understated one."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        if self.path == "/inflated":
            self.send_header("Content-Length", str(10**12))
        elif self.path == "/understated":
            self.send_header("Content-Length", "1000")
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"\x89PNG\r\n\x1a\n" + bytes(65_528)
        try:
            for _ in range(CAP // len(chunk) + 64):
                self.wfile.write(chunk)
        except OSError:
            pass  # the gateway hung up, as it should
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def liars() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Liars)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
async def strict_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    """A gateway with the SSRF guard fully on and tight video, audio and time limits."""
    base = e2e_settings(embedded_triton)
    limits = {
        "media": MediaSettings(
            video=VideoSettings(max_frames=30), audio=AudioSettings(max_duration_s=1)
        ),
        "decode": DecodeSettings(timeout_s=0.25),
    }
    settings = base.model_copy(
        update={**limits, "unsafe_allow_private_media_urls_for_tests": False}
    )
    port = free_loopback_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await task


@pytest.fixture
async def http(gateway_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=60) as client:
        yield client


@pytest.fixture
async def strict(strict_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=strict_url, timeout=60) as client:
        yield client


async def post(client: httpx.AsyncClient, body: dict) -> httpx.Response:
    return await client.post("/v1/chat/completions", json=body)


async def assert_still_serving(client: httpx.AsyncClient) -> None:
    ok = await post(client, chat(image_part(data_url(make_image(7), "image/png"))))
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    "template", [u for u in SSRF_URLS if "rebind.test" not in u], ids=lambda u: u[:48]
)
async def test_ssrf_matrix_through_the_gateway(strict: httpx.AsyncClient, template: str) -> None:
    url = template.format(port=9)
    error = assert_openai_error(await post(strict, chat(image_part(url))), 400, "invalid_image_url")
    assert error["param"] == "messages[0].content[0]"
    if "127.0.0.1" not in url and "::1" not in url:
        assert "127.0.0.1" not in error["message"]  # never what a name resolved to


async def test_video_url_refusals_say_video(strict: httpx.AsyncClient) -> None:
    body = chat({"type": "video_url", "video_url": {"url": "http://169.254.169.254/v.mp4"}})
    body["model"] = "reference-llava-onevision"
    assert_openai_error(await post(strict, body), 400, "invalid_video_url")
    await assert_still_serving(strict)


async def test_pixel_bomb(http: httpx.AsyncClient, media_server: MediaServer) -> None:
    media_server.files["bomb.png"] = (png_bomb(), "image/png")
    error = assert_openai_error(
        await post(http, chat(image_part(media_server.url("bomb.png")))), 400, "media_too_large"
    )
    assert "50000x50000" in error["message"] and "limit of 40 megapixels" in error["message"]


async def test_truncated_and_empty_and_foreign(http: httpx.AsyncClient, media_server: MediaServer):
    jpeg = make_image(3, (400, 300), "JPEG")
    media_server.files["truncated.jpg"] = (jpeg[: len(jpeg) // 2], "image/jpeg")
    media_server.files["empty.png"] = (b"", "image/png")
    cases = {"truncated.jpg": "invalid_media", "empty.png": "invalid_media"}
    cases["not-an-image.png"] = "unsupported_media_type"
    for name, code in cases.items():
        error = assert_openai_error(
            await post(http, chat(image_part(media_server.url(name)))), 400, code
        )
        assert "image 1 of 1" in error["message"]
        assert "Traceback" not in error["message"] and "PIL" not in error["message"]
    await assert_still_serving(http)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/streamed", "media_too_large"),  # no Content-Length: stopped while streaming
        ("/inflated", "media_too_large"),  # a Content-Length over the cap: refused up front
        # An understated length: the client reads only the declared 1000 bytes, never the
        # 20 MB behind them, and those bytes are a cut-off PNG.
        ("/understated", "invalid_media"),
    ],
)
async def test_bodies_over_the_cap(
    http: httpx.AsyncClient, liars: str, path: str, code: str
) -> None:
    error = assert_openai_error(await post(http, chat(image_part(liars + path))), 400, code)
    if code == "media_too_large":
        assert f"limit of {CAP} bytes" in error["message"]
    await assert_still_serving(http)


async def test_video_with_more_frames_than_allowed(strict: httpx.AsyncClient) -> None:
    clip = data_url(encode_video(frames=40), "video/mp4")
    body = chat({"type": "video_url", "video_url": {"url": clip}}, "reference-llava-onevision")
    error = assert_openai_error(await post(strict, body), 400, "media_too_large")
    assert "40 frames, over the limit of 30 frames" in error["message"]
    await assert_still_serving(strict)


async def test_decoding_over_its_budget_is_abandoned(strict: httpx.AsyncClient) -> None:
    body = chat(image_part(data_url(slow_png(), "image/png")))
    error = assert_openai_error(await post(strict, body), 400, "media_timeout")
    assert "longer than the 0.25 s" in error["message"]
    await assert_still_serving(strict)


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_audio", "input_audio": {"format": "wav", "data": "UklGRg=="}},
        {"type": "audio_url", "audio_url": {"url": "http://127.0.0.1:9/long.mp3"}},
    ],
)
async def test_audio_to_a_model_without_audio(http: httpx.AsyncClient, part: dict) -> None:
    """No served family takes audio yet: refused before any fetch or decode. (The decoder's
    own duration limit is tested in tests/gateway/{media/test_audio,pipeline/test_media}.py.)"""
    for model in ("reference-llava", "reference-llava-onevision"):
        error = assert_openai_error(await post(http, chat(part, model)), 400)
        assert error["code"] == "unsupported_content_part" and "audio" in error["message"]


async def test_video_to_a_model_without_video(http: httpx.AsyncClient) -> None:
    clip = data_url(encode_video(frames=4), "video/mp4")
    error = assert_openai_error(
        await post(http, chat({"type": "video_url", "video_url": {"url": clip}})), 400
    )
    assert error["code"] == "unsupported_content_part"


async def test_too_many_items_and_bad_sampling(http: httpx.AsyncClient) -> None:
    url = data_url(make_image(1, (32, 32)), "image/png")
    many = chat(image_part(url))
    many["messages"][0]["content"] = [image_part(url)] * 9 + [{"type": "text", "text": "hi"}]
    assert_openai_error(await post(http, many), 400, "too_many_media_items")
    clip = data_url(encode_video(frames=4), "video/mp4")
    body = chat({"type": "video_url", "video_url": {"url": clip}}, "reference-llava-onevision")
    body["media_io_kwargs"] = {"video": {"num_frames": 1000}}
    error = assert_openai_error(await post(http, body), 400)
    assert error["param"] == "media_io_kwargs.video.num_frames"
    body["media_io_kwargs"] = {"video": {"frames": 4}}  # a typo is refused, not ignored
    assert_openai_error(await post(http, body), 400)
