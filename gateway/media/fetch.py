"""Turn a media URL from a request into bytes, safely: data:, http(s) and (opt-in) file: URLs.

The gateway fetches every URL itself (Triton's own fetcher has no timeout and no SSRF guard).
For http(s) it resolves the host once, refuses any address that is not globally routable
(``netguard``), connects to that checked address (no second lookup, so DNS rebinding cannot
swap it), keeps the Host header and TLS SNI/certificate check on the host name, and follows
redirects itself, re-checking each hop. Bytes are capped up front (Content-Length) and while
streaming; the whole fetch runs under one deadline. Identical URLs fetched at the same time are
fetched once, and a small TTL cache serves repeats.

Every failure leaves as a ``MediaError`` (or ``InvalidRequest`` for a malformed URL) whose
message names at most the URL's host. Decoding the bytes is ``image.py``'s job.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import http
import mimetypes
import os
import socket
import ssl
import stat
import time
import urllib.parse
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from ipaddress import IPv4Address, IPv6Address, ip_network
from pathlib import Path

import httpx

from gateway.errors import GatewayError, InvalidRequest, MediaFetchError, MediaTooLarge
from gateway.media.netguard import is_globally_routable, parse_ip

__all__ = ["FetchLimits", "FetchedMedia", "MediaFetcher", "decode_data_url"]

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_TOTAL_TIMEOUT_S = 20.0
DEFAULT_MAX_REDIRECTS = 3
DEFAULT_CACHE_MAX_ENTRIES = 64
DEFAULT_CACHE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_CACHE_TTL_S = 60.0

MAX_URL_LENGTH = 8192  # for http(s) and file:; data: URLs are bounded by max_bytes instead
# What unsafe_allow_private_addresses_for_tests admits (test servers, container networks).
_TEST_NETWORKS = (
    *map(ip_network, ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    *map(ip_network, ("::1/128", "fc00::/7")),
)
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_TLS_POOLS = 32  # connection pools kept per TLS host name (see _PerHostTransport)
_HEADERS = {
    "User-Agent": "multimodal-gateway/0.1 (media fetcher)",
    "Accept": "image/*, video/*, audio/*;q=0.9, */*;q=0.5",
    # Media is already compressed; refusing transfer encodings avoids gzip bombs entirely.
    "Accept-Encoding": "identity",
}


@dataclass(frozen=True)
class FetchLimits:
    """How much one fetch may cost, and how much the repeat cache may hold."""

    max_bytes: int = DEFAULT_MAX_BYTES
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    total_timeout_s: float = DEFAULT_TOTAL_TIMEOUT_S
    max_redirects: int = DEFAULT_MAX_REDIRECTS
    allowed_domains: tuple[str, ...] = ()  # empty: any public host; else these and subdomains
    cache_max_entries: int = DEFAULT_CACHE_MAX_ENTRIES  # 0 disables the cache
    cache_max_bytes: int = DEFAULT_CACHE_MAX_BYTES
    cache_ttl_s: float = DEFAULT_CACHE_TTL_S


@dataclass(frozen=True)
class FetchedMedia:
    """Fetched bytes. ``url`` is the final URL after redirects; for data: URLs only
    ``data:<media type>``, so a 20 MB payload is not held twice."""

    data: bytes
    content_type: str | None  # the media type alone, lower-case ("image/png"), if declared
    url: str


def _media_type(value: str | None) -> str | None:
    """``image/PNG; charset=x`` -> ``image/png``; blank -> None."""
    media_type = (value or "").split(";", 1)[0].strip().lower()
    return media_type or None


def _too_large(what: str, size: int, limit: int) -> MediaTooLarge:
    return MediaTooLarge(f"{what} is {size} bytes, over the limit of {limit} bytes.")


def decode_data_url(url: str, max_bytes: int) -> FetchedMedia:
    """Decode an RFC 2397 ``data:`` URL, refusing oversize payloads before decoding them.

    Base64 (standard or URL-safe, padding optional, whitespace ignored) and percent-encoded
    payloads are accepted. The size check runs on the encoded text, whose length bounds the
    decoded size, so a huge payload costs no decoding work.
    """
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        raise InvalidRequest("The data: URL is malformed: it has no ',' before the data.")
    params = header.split(";")
    is_base64 = params[-1].strip().lower() == "base64"
    content_type = _media_type(params[0])
    if len(payload) > 3 * max_bytes + 64:  # no encoding of max_bytes bytes is longer
        raise MediaTooLarge(f"The data: URL payload is over the limit of {max_bytes} bytes.")
    if is_base64:
        data = _decode_base64(payload, max_bytes)
    else:
        data = urllib.parse.unquote_to_bytes(payload)
    if len(data) > max_bytes:
        raise _too_large("The data: URL payload", len(data), max_bytes)
    return FetchedMedia(data=data, content_type=content_type, url=f"data:{content_type or ''}")


def _decode_base64(payload: str, max_bytes: int) -> bytes:
    """Strictly decode base64 after an exact size check on the cleaned encoded text."""
    if "%" in payload:
        payload = urllib.parse.unquote(payload)
    text = "".join(payload.split()).rstrip("=").translate(str.maketrans("-_", "+/"))
    decoded_size = len(text) * 3 // 4
    if decoded_size > max_bytes:
        raise _too_large("The data: URL payload", decoded_size, max_bytes)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("The data: URL is not valid base64.") from None


class _ContentCache:
    """A small LRU of fetched media with a TTL and a byte budget; values are immutable."""

    def __init__(self, max_entries: int, max_bytes: int, ttl_s: float) -> None:
        self._max_entries, self._max_bytes, self._ttl_s = max_entries, max_bytes, ttl_s
        self._entries: OrderedDict[str, tuple[float, FetchedMedia]] = OrderedDict()
        self._bytes = 0

    def get(self, key: str) -> FetchedMedia | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: str, media: FetchedMedia) -> None:
        size = len(media.data)
        if self._max_entries <= 0 or size > self._max_bytes // 4:
            return  # one item may not crowd out the rest
        self._drop(key)
        self._entries[key] = (time.monotonic() + self._ttl_s, media)
        self._bytes += size
        while len(self._entries) > self._max_entries or self._bytes > self._max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[1].data)


class _PerHostTransport(httpx.AsyncBaseTransport):
    """One connection pool per TLS host name.

    Requests go to the pinned IP, so httpcore keys its pools on (scheme, IP, port): two host
    names behind one IP would share a TLS connection whose certificate was checked for only
    one of them. Keying pools on the SNI name keeps the certificate check per host name. Plain
    http shares one pool (it authenticates nobody). An evicted pool is closed only after the
    fetch deadline has passed, so no fetch still using it is cut off.
    """

    def __init__(self, grace_s: float, **transport_kwargs: object) -> None:
        self._grace_s = grace_s
        self._kwargs = transport_kwargs
        self._pools: OrderedDict[str, httpx.AsyncHTTPTransport] = OrderedDict()
        self._retired: list[tuple[float, httpx.AsyncHTTPTransport]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = str(request.extensions.get("sni_hostname") or "")
        pool = self._pools.pop(key, None) or httpx.AsyncHTTPTransport(**self._kwargs)  # type: ignore[arg-type]
        self._pools[key] = pool
        while len(self._pools) > _TLS_POOLS:
            self._retired.append((time.monotonic(), self._pools.popitem(last=False)[1]))
        now = time.monotonic()
        while self._retired and now - self._retired[0][0] > self._grace_s:
            await self._retired.pop(0)[1].aclose()
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        pools = [*self._pools.values(), *(pool for _, pool in self._retired)]
        self._pools.clear()
        self._retired.clear()
        for pool in pools:
            await pool.aclose()


class MediaFetcher:
    """Fetches media URLs for requests; build one per app (in the lifespan), ``aclose()`` it.

    ``file_root``: serve ``file:`` URLs, but only for files inside this directory after
    resolving symlinks; None (the default) refuses every file: URL.

    ``unsafe_allow_private_addresses_for_tests``: also admit loopback and private-use
    addresses (127.0.0.0/8, ::1, 10/8, 172.16/12, 192.168/16, fc00::/7), so tests can fetch
    from servers on 127.0.0.1 or a test container network. Link-local (the metadata service),
    CGNAT, multicast, reserved and embedded-IPv4 forms stay refused. Never set it in a
    deployment: it lets any user make the gateway call services on its own host and network.

    ``ssl_context``: the TLS trust to verify servers with (default: the system's CA bundle).
    """

    def __init__(
        self,
        limits: FetchLimits | None = None,
        *,
        file_root: Path | None = None,
        ssl_context: ssl.SSLContext | None = None,
        unsafe_allow_private_addresses_for_tests: bool = False,
    ) -> None:
        self.limits = limits or FetchLimits()
        self._file_root = file_root.resolve(strict=True) if file_root is not None else None
        self._allow_private = unsafe_allow_private_addresses_for_tests
        self._domains = tuple(_ascii_host(d.strip(".")) for d in self.limits.allowed_domains)
        self._cache = _ContentCache(
            self.limits.cache_max_entries, self.limits.cache_max_bytes, self.limits.cache_ttl_s
        )
        self._inflight: dict[str, asyncio.Task[FetchedMedia]] = {}
        timeout = httpx.Timeout(self.limits.total_timeout_s, connect=self.limits.connect_timeout_s)
        transport = _PerHostTransport(
            self.limits.total_timeout_s + 1.0, verify=ssl_context or True, trust_env=False
        )
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,  # no proxies or .netrc from the environment
            headers=_HEADERS,
            # The client serves every user: never keep or replay cookies between fetches.
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        )

    async def fetch(self, url: str) -> FetchedMedia:
        """The bytes behind ``url``; raises MediaFetchError, MediaTooLarge or InvalidRequest."""
        scheme = url.partition(":")[0].strip().lower() if ":" in url else ""
        if scheme == "data":
            return decode_data_url(url, self.limits.max_bytes)
        if len(url) > MAX_URL_LENGTH:
            raise InvalidRequest(f"The media URL is longer than {MAX_URL_LENGTH} characters.")
        if scheme == "file":
            return await self._fetch_file(url)
        if scheme not in ("http", "https"):
            raise MediaFetchError(
                f"Unsupported media URL scheme {scheme[:16]!r}; use https, http or data."
            )
        cached = self._cache.get(url)
        if cached is not None:
            return cached
        task = self._inflight.get(url)
        if task is None:  # single flight: later callers await the first caller's fetch
            task = asyncio.create_task(self._fetch_and_cache(url))
            self._inflight[url] = task
            task.add_done_callback(lambda done: self._forget(url, done))
        try:
            # shield: one caller going away must not cancel the fetch the others wait on
            return await asyncio.shield(task)
        except GatewayError as exc:
            raise copy.copy(exc) from exc  # each caller gets its own error to annotate

    async def aclose(self) -> None:
        """Cancel fetches in flight and close every connection."""
        for task in list(self._inflight.values()):
            task.cancel()
        await self._client.aclose()

    def _forget(self, url: str, task: asyncio.Task[FetchedMedia]) -> None:
        if self._inflight.get(url) is task:
            del self._inflight[url]
        if not task.cancelled():
            task.exception()  # retrieved here, so a fetch nobody awaits any more logs nothing

    async def _fetch_and_cache(self, url: str) -> FetchedMedia:
        media = await self._fetch_http(url)
        self._cache.put(url, media)
        return media

    async def _fetch_http(self, url: str) -> FetchedMedia:
        """Fetch under the total deadline, translating httpx errors once, here."""
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            raise InvalidRequest("The media URL is malformed.") from None
        host = parsed.host
        if not host:
            raise InvalidRequest("The media URL has no host.")
        limit = self.limits.total_timeout_s
        try:
            return await asyncio.wait_for(self._follow(parsed, host), limit)
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            raise MediaFetchError(
                f"Fetching media from {host} timed out after {limit:g} s."
            ) from exc
        except httpx.HTTPError as exc:
            raise MediaFetchError(f"Fetching media from {host} failed: {_describe(exc)}.") from exc
        except httpx.InvalidURL as exc:  # httpx parses every Location, even when not following
            raise MediaFetchError(
                f"Fetching media from {host} failed: a malformed redirect."
            ) from exc

    async def _follow(self, url: httpx.URL, host: str) -> FetchedMedia:
        """GET ``url``, following at most ``max_redirects`` redirects, each hop re-checked."""
        for hop in range(self.limits.max_redirects + 1):
            response = await self._send_pinned(url, host, redirected=hop > 0)
            try:
                if response.status_code in _REDIRECT_STATUSES:
                    url = _redirect_target(url, response, host)
                    continue
                if not response.is_success:
                    raise MediaFetchError(
                        f"Fetching media from {host} failed: the server answered HTTP "
                        f"{_status_text(response.status_code)}."
                    )
                data = await self._read_body(response, host)
                content_type = _media_type(response.headers.get("content-type"))
                return FetchedMedia(data=data, content_type=content_type, url=str(url))
            finally:
                await response.aclose()
        raise MediaFetchError(
            f"Fetching media from {host} failed: more than {self.limits.max_redirects} redirects."
        )

    async def _send_pinned(self, url: httpx.URL, host: str, *, redirected: bool) -> httpx.Response:
        """Send GET to a checked address of the URL's host; try the next address if one refuses."""
        where = f"{host} (after a redirect)" if redirected else host
        if url.scheme not in ("http", "https"):
            raise MediaFetchError(f"Fetching media from {where} failed: unsupported URL scheme.")
        name = url.raw_host.decode("ascii")
        if self._domains and not _domain_allowed(name, self._domains):
            raise MediaFetchError(f"Fetching media from {where} is not allowed on this server.")
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await self._resolve(name, port, where)
        headers = {"Host": url.netloc.decode("ascii")}
        extensions = {"sni_hostname": name} if url.scheme == "https" else {}
        failure: httpx.ConnectError | None = None
        for address in addresses:
            pinned = url.copy_with(host=str(address))
            request = self._client.build_request(
                "GET", pinned, headers=headers, extensions=extensions
            )
            try:
                return await self._client.send(request, stream=True)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None  # _resolve never returns an empty list
        raise failure

    async def _resolve(self, name: str, port: int, where: str) -> list[IPv4Address | IPv6Address]:
        """Every address of ``name``; refuses the host if ANY of them is not public."""
        literal = parse_ip(name)
        if literal is not None:
            addresses: list[IPv4Address | IPv6Address] = [literal]
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
            except (socket.gaierror, UnicodeError):
                raise MediaFetchError(f"Could not resolve the media host {where}.") from None
            addresses = list(dict.fromkeys(a for a in map(_info_address, infos) if a))
            if not addresses:
                raise MediaFetchError(f"Could not resolve the media host {where}.")
        if not all(self._address_allowed(a) for a in addresses):
            raise MediaFetchError(
                f"Fetching media from {where} is refused: it is not a public internet address."
            )
        return addresses

    def _address_allowed(self, address: IPv4Address | IPv6Address) -> bool:
        if self._allow_private and any(address in net for net in _TEST_NETWORKS):
            return True
        return is_globally_routable(address)

    async def _read_body(self, response: httpx.Response, host: str) -> bytes:
        """Read the body, refusing it up front by Content-Length and again while streaming."""
        limit = self.limits.max_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(f"The media at {host}", int(declared), limit)
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise MediaTooLarge(f"The media at {host} is over the limit of {limit} bytes.")
        return bytes(body)

    async def _fetch_file(self, url: str) -> FetchedMedia:
        if self._file_root is None:
            raise MediaFetchError("file: URLs are not enabled on this server.")
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise MediaFetchError("file: URLs must name a local path (file:///path).")
        path = Path(urllib.request.url2pathname(parts.path))
        if not path.is_absolute():
            raise InvalidRequest("A file: URL must hold an absolute path (file:///path).")
        data = await asyncio.to_thread(_read_local, path, self._file_root, self.limits.max_bytes)
        return FetchedMedia(data=data, content_type=mimetypes.guess_type(path.name)[0], url=url)


def _read_local(path: Path, root: Path, max_bytes: int) -> bytes:
    """Read a regular file inside ``root`` (symlinks resolved first), at most ``max_bytes``."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise MediaFetchError("The local media file does not exist.") from None
    if not resolved.is_relative_to(root):
        raise MediaFetchError("The local media file is outside the directory this server serves.")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(resolved, flags)  # O_NONBLOCK: a FIFO must not hang the worker
    except OSError:
        raise MediaFetchError("The local media file cannot be read.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MediaFetchError("The local media path is not a regular file.")
        if info.st_size > max_bytes:
            raise _too_large("The local media file", info.st_size, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise MediaTooLarge(f"The local media file is over the limit of {max_bytes} bytes.")
    return data


def _redirect_target(url: httpx.URL, response: httpx.Response, host: str) -> httpx.URL:
    """The next hop; httpx has already parsed Location (a malformed one raised InvalidURL)."""
    location = response.headers.get("location")
    if not location:
        raise MediaFetchError(f"Fetching media from {host} failed: a redirect without Location.")
    return url.join(location)


def _info_address(info: tuple) -> IPv4Address | IPv6Address | None:  # type: ignore[type-arg]
    """The address of one getaddrinfo entry, if it is IPv4 or IPv6."""
    family, sockaddr = info[0], info[4]
    if family not in (socket.AF_INET, socket.AF_INET6):
        return None
    return parse_ip(str(sockaddr[0]))


def _ascii_host(name: str) -> str:
    """A host name as DNS sees it: lower-case, IDNA-encoded (``bücher.de`` -> ``xn--...``)."""
    try:
        return httpx.URL(f"http://{name}/").raw_host.decode("ascii")
    except httpx.InvalidURL:
        raise ValueError(f"allowed_domains holds an invalid domain: {name!r}") from None


def _domain_allowed(name: str, domains: tuple[str, ...]) -> bool:
    """``name`` equals one of ``domains`` or is a subdomain of one (``a.b.com`` for ``b.com``)."""
    name = name.rstrip(".")
    return any(name == d or name.endswith("." + d) for d in domains)


def _status_text(status: int) -> str:
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


_REASONS: tuple[tuple[type[httpx.HTTPError], str], ...] = (
    (
        httpx.ConnectError,
        "could not connect (refused, unreachable, or a TLS certificate not valid for it)",
    ),
    (httpx.RemoteProtocolError, "the server sent an invalid HTTP response"),
    (httpx.ReadError, "the connection was interrupted"),
    (httpx.WriteError, "the connection was interrupted"),
    (httpx.DecodingError, "the response body could not be decoded"),
)


def _describe(exc: httpx.HTTPError) -> str:
    """A user-facing reason for a transport error, free of addresses and internals."""
    return next((text for kind, text in _REASONS if isinstance(exc, kind)), "a network error")
