"""Image URLs fetched from an HTTP server on loopback that lies about its bodies: over the cap
with no length, with an inflated one, with an understated one; and one that answers 404.
The "loopback" gateway lets media URLs reach 127.0.0.1 (its SSRF guard's test switch)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.fakes.app import assert_openai_error, chat, data_url, http_client, image_part, png
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import Gateways

URL = "/v1/chat/completions"
CAP = 20 * 1024 * 1024  # the default max_media_bytes


class _Liars(BaseHTTPRequestHandler):
    """Bodies over the cap: with no length, with an inflated one, with an understated one."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path not in ("/streamed", "/inflated", "/understated"):
            self.send_error(404)
            return
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
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
async def loopback(gateways: Gateways, fake: FakeTriton) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client((await gateways.get("loopback")).app) as client:
        yield client


def ask(url: str) -> dict:
    return chat([image_part(url), {"type": "text", "text": "What is this?"}], max_tokens=2)


async def assert_still_serving(client: httpx.AsyncClient, fake: FakeTriton) -> None:
    assert fake.requests == []  # nothing refused reached Triton
    ok = await client.post(URL, json=ask(data_url(png(7))))
    assert ok.status_code == 200, ok.text


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
    loopback: httpx.AsyncClient, fake: FakeTriton, liars: str, path: str, code: str
) -> None:
    error = assert_openai_error(await loopback.post(URL, json=ask(liars + path)), 400, code)
    if code == "media_too_large":
        assert f"limit of {CAP} bytes" in error["message"]
    await assert_still_serving(loopback, fake)


async def test_streaming_request_with_bad_image_fails_before_streaming(
    loopback: httpx.AsyncClient, fake: FakeTriton, liars: str
) -> None:
    response = await loopback.post(URL, json=ask(liars + "/missing.png") | {"stream": True})
    error = assert_openai_error(response, 400, "media_fetch_failed")
    assert "404" in error["message"] and error["param"] == "messages[0].content[0]"
    assert response.headers["content-type"] == "application/json"
    await assert_still_serving(loopback, fake)
