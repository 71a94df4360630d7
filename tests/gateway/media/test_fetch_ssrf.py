"""The SSRF matrix: every way a URL can aim at a non-public address is refused, unconnected.

Each URL points at a real HTTP server on 127.0.0.1 (or at an address no test should reach);
the fetcher runs without the test switch, so the server must see no request at all.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address

import pytest

from gateway.errors import MediaFetchError, MediaURLError
from gateway.media.fetch import IPAddress, MediaFetcher

# {port} is the loopback server's port. Every blocked range, in every spelling we know.
SSRF_URLS = [
    # blocked ranges, literal
    "http://127.0.0.1:{port}/a.png",
    "http://127.9.9.9:{port}/a.png",
    "http://0.0.0.0:{port}/a.png",
    "http://10.0.0.1/a.png",
    "http://172.16.5.4/a.png",
    "http://192.168.0.10/a.png",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/a.png",
    "http://192.0.0.8/a.png",
    "http://198.18.0.1/a.png",
    "http://224.0.0.1/a.png",
    "http://240.0.0.1/a.png",
    "http://255.255.255.255/a.png",
    "http://[::1]:{port}/a.png",
    "http://[::]:{port}/a.png",
    "http://[fe80::1]/a.png",
    "http://[fc00::1]/a.png",
    "http://[ff02::1]/a.png",
    # decimal, hex, octal and short IPv4 spellings (getaddrinfo's inet_aton reads them all)
    "http://2130706433:{port}/a.png",
    "http://0x7f000001:{port}/a.png",
    "http://0177.0.0.1:{port}/a.png",
    "http://0x7f.0.0.1:{port}/a.png",
    "http://127.1:{port}/a.png",
    "http://017700000001:{port}/a.png",
    "http://2852039166/latest/meta-data/",  # 169.254.169.254
    "http://0xa9fea9fe/latest/meta-data/",
    # IPv6 wrappers of IPv4 addresses
    "http://[::ffff:127.0.0.1]:{port}/a.png",
    "http://[::ffff:7f00:1]:{port}/a.png",
    "http://[0:0:0:0:0:ffff:169.254.169.254]/",
    "http://[::127.0.0.1]:{port}/a.png",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/a.png",
    "http://[2002:a9fe:a9fe::1]/",
    # parser tricks: userinfo, fragments, backslashes, a name that resolves to loopback
    "http://example.com@127.0.0.1:{port}/a.png",
    "http://user:pass@[::1]:{port}/a.png",
    "http://127.0.0.1:{port}#@example.com/a.png",
    "http://127.0.0.1:{port}\\@example.com/a.png",
    "http://example.com\\@127.0.0.1:{port}/a.png",
    "http://localhost:{port}/a.png",
    "http://LocalHost:{port}/a.png",
    "http://127.0.0.1:{port}/a.png\t",
    "http://rebind.test:{port}/a.png",  # the test resolver: one public and one loopback answer
    # schemes that are not http(s)
    "gopher://127.0.0.1:{port}/_GET%20/a.png",
    "ftp://127.0.0.1:{port}/a.png",
    "file:///etc/passwd",
    "dict://127.0.0.1:{port}/info",
]


class _Quiet(BaseHTTPRequestHandler):
    hits: Counter[str]

    def do_GET(self) -> None:
        self.hits[self.path] += 1
        location = {"/to-metadata": "http://169.254.169.254/latest/meta-data/"}.get(self.path)
        if self.path.startswith("/hop/"):
            left = int(self.path.rsplit("/", 1)[1])
            location = f"/hop/{left - 1}" if left else "http://[::ffff:a9fe:a9fe]/latest"
        self.send_response(302 if location else 200)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def loopback() -> Iterator[tuple[int, Counter[str]]]:
    hits: Counter[str] = Counter()
    handler = type("Handler", (_Quiet,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hits
    server.shutdown()
    server.server_close()


async def rebinding_resolver(name: str, port: int) -> list[IPAddress]:
    """A DNS answer that mixes a public address with loopback (a rebinding attempt)."""
    if name == "rebind.test":
        return [ip_address("93.184.216.34"), ip_address("127.0.0.1")]
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(name, port)
    return [ip_address(info[4][0]) for info in infos]


def test_the_matrix_is_big_enough() -> None:
    assert len(SSRF_URLS) >= 30


@pytest.mark.parametrize("template", SSRF_URLS)
async def test_refused_without_connecting(
    loopback: tuple[int, Counter[str]], template: str
) -> None:
    port, hits = loopback
    url = template.format(port=port)
    fetcher = MediaFetcher(resolver=rebinding_resolver)
    before = sum(hits.values())
    try:
        with pytest.raises(MediaURLError) as caught:
            await asyncio.wait_for(fetcher.fetch(url), 2)
    finally:
        await fetcher.aclose()
    assert sum(hits.values()) == before, "the refused URL reached the server"
    assert caught.value.code == "invalid_image_url"
    if "127.0.0.1" not in url and "::1" not in url:  # never reveal what a name resolved to
        assert "127.0.0.1" not in caught.value.message


async def test_redirect_chain_to_a_blocked_address(loopback: tuple[int, Counter[str]]) -> None:
    """With the test switch on (loopback allowed), the chain runs, and its last hop, to the
    metadata service in IPv4-mapped form, is refused before any connection."""
    port, hits = loopback
    fetcher = MediaFetcher(unsafe_allow_private_addresses_for_tests=True)
    try:
        with pytest.raises(MediaURLError, match=r"127\.0\.0\.1 \(after a redirect\) is refused"):
            await fetcher.fetch(f"http://127.0.0.1:{port}/hop/2")
        with pytest.raises(MediaURLError, match="not a public internet address"):
            await fetcher.fetch(f"http://127.0.0.1:{port}/to-metadata")
    finally:
        await fetcher.aclose()
    assert hits["/hop/2"] == hits["/hop/1"] == hits["/hop/0"] == 1


async def test_resolution_failure_is_a_fetch_error() -> None:
    fetcher = MediaFetcher()
    try:
        with pytest.raises(MediaFetchError, match="Could not resolve") as caught:
            await fetcher.fetch("http://no-such-host.invalid/a.png")
    finally:
        await fetcher.aclose()
    assert caught.value.code == "media_fetch_failed"
