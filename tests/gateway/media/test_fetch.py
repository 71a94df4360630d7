"""MediaFetcher against real HTTP(S) servers on 127.0.0.1, started inside the test session."""

from __future__ import annotations

import asyncio
import datetime
import io
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from PIL import Image

from gateway.errors import MediaFetchError, MediaTimeout, MediaTooLarge, MediaURLError
from gateway.media.fetch import FetchLimits, MediaFetcher, _domain_allowed


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 10, 10)).save(out, "PNG")
    return out.getvalue()


PNG = _png()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hits: Counter[str]
    seen: dict[str, str]
    stop: threading.Event


class _Handler(BaseHTTPRequestHandler):
    """Routes a test needs: images, errors, redirects, oversize and slow bodies."""

    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def _reply(self, status: int, body: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        headers.setdefault("Content-Type", "application/octet-stream")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.server.hits[parts.path] += 1
        self.server.seen["host"] = self.headers.get("Host", "")
        self.server.seen["cookie"] = self.headers.get("Cookie", "")
        route = getattr(self, "route_" + parts.path.strip("/").split("/")[0].split(".")[0], None)
        if route is None:
            self._reply(404, b"not found")
        else:
            route(parts.path, parse_qs(parts.query))

    def route_img(self, path: str, query: dict[str, list[str]]) -> None:
        self._reply(200, PNG, Content_Type="image/PNG; charset=binary")

    def route_redirect(self, path: str, query: dict[str, list[str]]) -> None:
        self._reply(302, Location=query["to"][0])

    def route_hops(self, path: str, query: dict[str, list[str]]) -> None:
        left = int(path.rsplit("/", 1)[1])
        if left == 0:
            self._reply(200, PNG, Content_Type="image/png")
        else:
            self._reply(301, Location=f"/hops/{left - 1}")

    def route_endless(self, path: str, query: dict[str, list[str]]) -> None:
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"\0" * 65536
        try:
            while not self.server.stop.is_set():
                self.wfile.write(chunk)
        except OSError:
            pass  # the client hung up, as it should
        self.close_connection = True

    def route_liar(self, path: str, query: dict[str, list[str]]) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(10**10))
        self.end_headers()
        self.wfile.write(b"x" * 100)
        self.close_connection = True

    def route_slow(self, path: str, query: dict[str, list[str]]) -> None:
        self.server.stop.wait(float(query.get("s", ["3"])[0]))
        self._reply(200, PNG, Content_Type="image/png")

    def route_cookie(self, path: str, query: dict[str, list[str]]) -> None:
        self._reply(200, PNG, Set_Cookie="session=secret; Path=/")


def _serve(ssl_context: ssl.SSLContext | None = None) -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.hits, server.seen, server.stop = Counter(), {}, threading.Event()
    if ssl_context is not None:
        server.socket = ssl_context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    yield from _serve()


@pytest.fixture
def base(server: _Server) -> str:
    server.hits.clear()
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
async def fetcher() -> MediaFetcher:
    fetcher = MediaFetcher(unsafe_allow_private_addresses_for_tests=True)
    yield fetcher
    await fetcher.aclose()


async def test_fetches_image_bytes_and_media_type(fetcher: MediaFetcher, base: str) -> None:
    media = await fetcher.fetch(f"{base}/img.png")
    assert media.data == PNG
    assert media.content_type == "image/png"
    assert media.url == f"{base}/img.png"


async def test_loopback_refused_without_the_test_switch(server: _Server, base: str) -> None:
    fetcher = MediaFetcher()
    try:
        for url in (f"{base}/img.png", base.replace("127.0.0.1", "localhost") + "/img.png"):
            with pytest.raises(MediaURLError, match="not a public internet address"):
                await fetcher.fetch(url)
    finally:
        await fetcher.aclose()
    assert server.hits["/img.png"] == 0  # refused before any connection


async def test_http_error_names_status_and_host_only(fetcher: MediaFetcher, base: str) -> None:
    with pytest.raises(MediaFetchError) as caught:
        await fetcher.fetch(f"{base}/missing/photo.png?token=s3cret")
    message = caught.value.message
    assert "404 Not Found" in message and "127.0.0.1" in message
    assert "s3cret" not in message and "photo" not in message


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0/x.png",
        "http://100.64.0.1/x.png",
        "http://[fe80::1]/x.png",
        "http://[::ffff:192.168.1.1]/x.png",
        "file:///etc/passwd",
        "data:image/png;base64,AAAA",
    ],
)
async def test_redirect_to_forbidden_target_refused(
    fetcher: MediaFetcher, base: str, target: str
) -> None:
    started = time.monotonic()
    with pytest.raises(MediaFetchError) as caught:
        await fetcher.fetch(f"{base}/redirect?to={target}")
    assert "redirect" in caught.value.message
    assert "169.254" not in caught.value.message and "192.168" not in caught.value.message
    assert time.monotonic() - started < 1.0  # refused, not attempted


async def test_redirects_followed_up_to_the_limit(fetcher: MediaFetcher, base: str) -> None:
    media = await fetcher.fetch(f"{base}/hops/3")
    assert media.data == PNG and media.url.endswith("/hops/0")
    with pytest.raises(MediaFetchError, match="more than 3 redirects"):
        await fetcher.fetch(f"{base}/hops/4")


async def test_endless_body_stops_at_max_bytes(base: str) -> None:
    fetcher = MediaFetcher(
        FetchLimits(max_bytes=1 << 20), unsafe_allow_private_addresses_for_tests=True
    )
    try:
        with pytest.raises(MediaTooLarge, match="over the limit of 1048576 bytes"):
            await fetcher.fetch(f"{base}/endless")
    finally:
        await fetcher.aclose()


async def test_declared_oversize_refused_before_reading(fetcher: MediaFetcher, base: str) -> None:
    with pytest.raises(MediaTooLarge, match="10000000000 bytes"):
        await fetcher.fetch(f"{base}/liar")


async def test_total_deadline(base: str) -> None:
    limits = FetchLimits(total_timeout_s=0.3)
    fetcher = MediaFetcher(limits, unsafe_allow_private_addresses_for_tests=True)
    started = time.monotonic()
    try:
        with pytest.raises(MediaTimeout, match=r"timed out after 0\.3 s"):
            await fetcher.fetch(f"{base}/slow?s=3")
    finally:
        await fetcher.aclose()
    assert time.monotonic() - started < 1.5


async def test_connection_refused_is_a_fetch_error(fetcher: MediaFetcher) -> None:
    with pytest.raises(MediaFetchError, match="could not connect"):
        await fetcher.fetch("http://127.0.0.1:9/x.png")  # discard port: nothing listens


async def test_concurrent_identical_fetches_hit_server_once(server: _Server, base: str) -> None:
    fetcher = MediaFetcher(unsafe_allow_private_addresses_for_tests=True)
    url = f"{base}/slow?s=0.2"
    try:
        results = await asyncio.gather(*(fetcher.fetch(url) for _ in range(10)))
        assert server.hits["/slow"] == 1
        assert all(r.data == PNG for r in results)
        await fetcher.fetch(url)  # served from the cache
        assert server.hits["/slow"] == 1
    finally:
        await fetcher.aclose()


async def test_a_shared_failure_reaches_each_caller_as_its_own_error(
    server: _Server, fetcher: MediaFetcher, base: str
) -> None:
    url = f"{base}/missing/shared.png"
    results = await asyncio.gather(*(fetcher.fetch(url) for _ in range(3)), return_exceptions=True)
    assert server.hits["/missing/shared.png"] == 1
    assert all(isinstance(r, MediaFetchError) and "404" in r.message for r in results)
    assert len({id(r) for r in results}) == 3  # callers may annotate their copy safely


async def test_cancelled_waiter_does_not_cancel_the_shared_fetch(base: str) -> None:
    fetcher = MediaFetcher(unsafe_allow_private_addresses_for_tests=True)
    url = f"{base}/slow?s=0.2"
    try:
        first = asyncio.create_task(fetcher.fetch(url))
        second = asyncio.create_task(fetcher.fetch(url))
        await asyncio.sleep(0.05)
        first.cancel()
        assert (await second).data == PNG
    finally:
        await fetcher.aclose()


@pytest.mark.parametrize(
    "limits", [FetchLimits(cache_ttl_s=0.05), FetchLimits(cache_max_entries=0)], ids=["ttl", "off"]
)
async def test_cache_expires_and_can_be_disabled(
    server: _Server, base: str, limits: FetchLimits
) -> None:
    fetcher = MediaFetcher(limits, unsafe_allow_private_addresses_for_tests=True)
    try:
        await fetcher.fetch(f"{base}/img.png")
        await asyncio.sleep(0.1)
        await fetcher.fetch(f"{base}/img.png")
    finally:
        await fetcher.aclose()
    assert server.hits["/img.png"] == 2


async def test_cookies_are_never_replayed(
    server: _Server, fetcher: MediaFetcher, base: str
) -> None:
    await fetcher.fetch(f"{base}/cookie")
    await fetcher.fetch(f"{base}/img.png?other")
    assert server.seen["cookie"] == ""


async def test_host_header_keeps_the_name(server: _Server, fetcher: MediaFetcher) -> None:
    port = server.server_address[1]
    await fetcher.fetch(f"http://localhost:{port}/img.png?host")
    assert server.seen["host"] == f"localhost:{port}"


async def test_allowed_domains(base: str) -> None:
    fetcher = MediaFetcher(
        FetchLimits(allowed_domains=("example.com",)), unsafe_allow_private_addresses_for_tests=True
    )
    try:
        with pytest.raises(MediaFetchError, match="not allowed on this server"):
            await fetcher.fetch(f"{base}/img.png")
    finally:
        await fetcher.aclose()
    assert _domain_allowed("cdn.example.com", ("example.com",))
    assert _domain_allowed("example.com.", ("example.com",))
    assert not _domain_allowed("badexample.com", ("example.com",))
    assert not _domain_allowed("example.com.evil.net", ("example.com",))


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://example.com/a.png", MediaURLError),
        ("gopher://example.com/", MediaURLError),
        ("javascript:alert(1)", MediaURLError),
        ("example.com/a.png", MediaURLError),
        ("http:///nohost", MediaURLError),
        ("http://[::1/", MediaURLError),
        ("http://example.com/" + "a" * 9000, MediaURLError),
        ("file:///etc/passwd", MediaURLError),
    ],
)
async def test_bad_urls(fetcher: MediaFetcher, url: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        await fetcher.fetch(url)


# --- file: URLs ---------------------------------------------------------------------------


async def test_file_urls_confined_to_root(tmp_path: Path) -> None:
    root = tmp_path / "media"
    root.mkdir()
    (root / "a.png").write_bytes(PNG)
    (root / "big.bin").write_bytes(b"x" * 2048)
    (tmp_path / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    fetcher = MediaFetcher(FetchLimits(max_bytes=1024), file_root=root)
    try:
        media = await fetcher.fetch((root / "a.png").as_uri())
        assert media.data == PNG and media.content_type == "image/png"
        for outside in (root / "link.txt", root / ".." / "secret.txt", root / "nope.png"):
            with pytest.raises(MediaFetchError):
                await fetcher.fetch("file://" + str(outside))
        with pytest.raises(MediaFetchError, match="not a regular file"):
            await fetcher.fetch(root.as_uri())
        with pytest.raises(MediaTooLarge):
            await fetcher.fetch((root / "big.bin").as_uri())
    finally:
        await fetcher.aclose()


# --- https: the TLS name is the host name, not the pinned IP -------------------------------


def _self_signed_localhost() -> tuple[bytes, bytes]:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


async def test_https_sends_sni_and_verifies_the_host_name(tmp_path: Path) -> None:
    cert_pem, key_pem = _self_signed_localhost()
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    sni_seen: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: sni_seen.append(name)
    client_ctx = ssl.create_default_context(cadata=cert_pem.decode())
    for server in _serve(server_ctx):
        port = server.server_address[1]
        fetcher = MediaFetcher(
            ssl_context=client_ctx, unsafe_allow_private_addresses_for_tests=True
        )
        try:
            # The certificate names only "localhost": it verifies because the name, not the
            # pinned 127.0.0.1, is what TLS checks.
            media = await fetcher.fetch(f"https://localhost:{port}/img.png")
            assert media.data == PNG
            assert sni_seen[-1] == "localhost"
            assert server.seen["host"] == f"localhost:{port}"
            with pytest.raises(MediaFetchError, match="could not connect"):
                await fetcher.fetch(f"https://127.0.0.1:{port}/img.png")  # no IP in the cert
        finally:
            await fetcher.aclose()
