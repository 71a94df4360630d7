"""Turn a media URL from a request into bytes, safely: data:, http(s) and (opt-in) file: URLs.

The gateway fetches every URL itself (Triton's own fetcher has no timeout and no SSRF guard).
For http(s) it resolves the host once, refuses any address that is not globally routable
(``netguard``), connects to that checked address (no second lookup, so DNS rebinding cannot
swap it), keeps the Host header and TLS SNI/certificate check on the host name, and follows
redirects itself, re-checking each hop. Bytes are capped up front (Content-Length) and while
streaming; the whole fetch runs under one deadline. Identical URLs fetched at the same time are
fetched once, and a small TTL cache serves repeats (both in ``cache.py``).

Every failure leaves as a ``MediaError`` whose message names at most the URL's host: a URL
refused before fetching is a ``MediaURLError``, a fetch that fails a ``MediaFetchError``, one
that runs out of time a ``MediaTimeout``. Decoding the bytes is ``image.py``'s (and
``video.py``'s, ``audio.py``'s) job.
"""

from __future__ import annotations

import asyncio
import http
import mimetypes
import re
import socket
import ssl
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from ipaddress import IPv4Address, IPv6Address, ip_network
from pathlib import Path
from typing import Any

import httpx

from gateway.errors import MediaFetchError, MediaTimeout, MediaTooLarge, MediaURLError
from gateway.media import limits
from gateway.media._transport import PerHostTransport
from gateway.media.cache import (
    DEFAULT_CACHE_MAX_BYTES,
    DEFAULT_CACHE_MAX_ENTRIES,
    DEFAULT_CACHE_TTL_S,
    ContentCache,
    SingleFlight,
)
from gateway.media.local import (
    FetchedMedia,
    FrameList,
    decode_data_url,
    media_type,
    read_local_file,
    too_large,
)
from gateway.media.netguard import is_globally_routable, parse_ip

__all__ = [
    "FetchLimits",
    "FetchedMedia",
    "FrameList",
    "MediaFetcher",
    "Resolver",
    "decode_data_url",
]

DEFAULT_MAX_BYTES = limits.DEFAULT_MAX_BYTES
DEFAULT_CONNECT_TIMEOUT_S = limits.DEFAULT_CONNECT_TIMEOUT_S
DEFAULT_TOTAL_TIMEOUT_S = limits.DEFAULT_TOTAL_TIMEOUT_S
DEFAULT_MAX_REDIRECTS = limits.DEFAULT_MAX_REDIRECTS

MAX_URL_LENGTH = 8192  # for http(s) and file:; data: URLs are bounded by max_bytes instead
# What unsafe_allow_private_addresses_for_tests admits (test servers, container networks).
_TEST_NETWORKS = (
    *map(ip_network, ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    *map(ip_network, ("::1/128", "fc00::/7")),
)
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Characters on which RFC 3986 (httpx) and WHATWG (browsers, many validators) parsers disagree
# ("http://a\\@b/" has host b for one and a for the other): refused, not interpreted.
_AMBIGUOUS = re.compile(r"[\\\s\x00-\x1f\x7f]")
_HEADERS = {
    "User-Agent": "multimodal-gateway/0.1 (media fetcher)",
    "Accept": "image/*, video/*, audio/*;q=0.9, */*;q=0.5",
    # Media is already compressed; refusing transfer encodings avoids gzip bombs entirely.
    "Accept-Encoding": "identity",
}


IPAddress = IPv4Address | IPv6Address
# (host name, port) -> every address of the name. Tests inject one to make a name resolve to
# loopback without touching the system resolver; the default asks getaddrinfo.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


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

    ``resolver``: where host names are looked up (default: the system's getaddrinfo). Every
    address it returns is still judged by the SSRF guard; tests use it to make a name resolve
    to loopback.
    """

    def __init__(
        self,
        limits: FetchLimits | None = None,
        *,
        file_root: Path | None = None,
        ssl_context: ssl.SSLContext | None = None,
        unsafe_allow_private_addresses_for_tests: bool = False,
        resolver: Resolver | None = None,
    ) -> None:
        self.limits = limits or FetchLimits()
        self._resolver = resolver or _system_resolve
        self._file_root = file_root.resolve(strict=True) if file_root is not None else None
        self._allow_private = unsafe_allow_private_addresses_for_tests
        self._domains = tuple(_ascii_host(d.strip(".")) for d in self.limits.allowed_domains)
        self._cache: ContentCache[FetchedMedia] = ContentCache(
            self.limits.cache_max_entries, self.limits.cache_max_bytes, self.limits.cache_ttl_s
        )
        self._single_flight: SingleFlight[FetchedMedia] = SingleFlight()
        timeout = httpx.Timeout(self.limits.total_timeout_s, connect=self.limits.connect_timeout_s)
        transport = PerHostTransport(
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

    async def fetch(self, url: str) -> FetchedMedia | FrameList:
        """The bytes behind ``url`` (or, for ``data:video/jpeg``, the video's frame list).

        Raises MediaURLError (the URL is refused), MediaFetchError, MediaTooLarge or
        MediaTimeout.
        """
        colon = url.find(":")  # not partition: that copies a data: URL's payload
        scheme = url[:colon].strip().lower() if colon >= 0 else ""
        if scheme == "data":
            return decode_data_url(url, self.limits.max_bytes)
        if len(url) > MAX_URL_LENGTH:
            raise MediaURLError(f"The media URL is longer than {MAX_URL_LENGTH} characters.")
        if _AMBIGUOUS.search(url):
            raise MediaURLError(
                "The media URL holds a backslash, whitespace or a control character; URL "
                "parsers disagree on those, so it is refused. Percent-encode them."
            )
        if scheme == "file":
            return await self._fetch_file(url)
        if scheme not in ("http", "https"):
            raise MediaURLError(
                f"Unsupported media URL scheme {scheme[:16]!r}; use https, http or data."
            )
        cached = self._cache.get(url)
        if cached is not None:
            return cached
        return await self._single_flight.run(url, lambda: self._fetch_and_cache(url))

    async def aclose(self) -> None:
        """Cancel fetches in flight and close every connection."""
        self._single_flight.cancel_all()
        await self._client.aclose()

    async def _fetch_and_cache(self, url: str) -> FetchedMedia:
        media = await self._fetch_http(url)
        self._cache.put(url, media, len(media.data))
        return media

    async def _fetch_http(self, url: str) -> FetchedMedia:
        """Fetch under the total deadline, translating httpx errors once, here."""
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            raise MediaURLError("The media URL is malformed.") from None
        host = parsed.host
        if not host:
            raise MediaURLError("The media URL has no host.")
        limit = self.limits.total_timeout_s
        try:
            return await asyncio.wait_for(self._follow(parsed, host), limit)
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            raise MediaTimeout(f"Fetching media from {host} timed out after {limit:g} s.") from exc
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
                content_type = media_type(response.headers.get("content-type"))
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
            raise MediaURLError(f"Fetching media from {where} is refused: unsupported URL scheme.")
        name = url.raw_host.decode("ascii")
        if self._domains and not _domain_allowed(name, self._domains):
            raise MediaURLError(f"Fetching media from {where} is not allowed on this server.")
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

    async def _resolve(self, name: str, port: int, where: str) -> list[IPAddress]:
        """Every address of ``name``; refuses the host if ANY of them is not public.

        Names like ``2130706433``, ``0x7f.1`` or ``0177.0.0.1`` are no IP literal to Python
        but are to getaddrinfo (inet_aton): they resolve, and the address is judged here.
        """
        literal = parse_ip(name)
        if literal is not None:
            addresses: list[IPAddress] = [literal]
        else:
            try:
                addresses = list(dict.fromkeys(await self._resolver(name, port)))
            except (OSError, UnicodeError):
                raise MediaFetchError(f"Could not resolve the media host {where}.") from None
            if not addresses:
                raise MediaFetchError(f"Could not resolve the media host {where}.")
        if not all(self._address_allowed(a) for a in addresses):
            raise MediaURLError(
                f"Fetching media from {where} is refused: it is not a public internet address."
            )
        return addresses

    def _address_allowed(self, address: IPAddress) -> bool:
        if self._allow_private and any(address in net for net in _TEST_NETWORKS):
            return True
        return is_globally_routable(address)

    async def _read_body(self, response: httpx.Response, host: str) -> bytes:
        """Read the body, refusing it up front by Content-Length and again while streaming."""
        limit = self.limits.max_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large(f"The media at {host}", int(declared), limit)
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise MediaTooLarge(f"The media at {host} is over the limit of {limit} bytes.")
        return bytes(body)

    async def _fetch_file(self, url: str) -> FetchedMedia:
        if self._file_root is None:
            raise MediaURLError("file: URLs are not enabled on this server.")
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise MediaURLError("file: URLs must name a local path (file:///path).")
        path = Path(urllib.request.url2pathname(parts.path))
        if not path.is_absolute():
            raise MediaURLError("A file: URL must hold an absolute path (file:///path).")
        data = await asyncio.to_thread(
            read_local_file, path, self._file_root, self.limits.max_bytes
        )
        return FetchedMedia(data=data, content_type=mimetypes.guess_type(path.name)[0], url=url)


def _redirect_target(url: httpx.URL, response: httpx.Response, host: str) -> httpx.URL:
    """The next hop; httpx has already parsed Location (a malformed one raised InvalidURL)."""
    location = response.headers.get("location")
    if not location:
        raise MediaFetchError(f"Fetching media from {host} failed: a redirect without Location.")
    return url.join(location)


async def _system_resolve(name: str, port: int) -> list[IPAddress]:
    """The system resolver's IPv4 and IPv6 addresses for ``name``."""
    infos = await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
    return [address for address in map(_info_address, infos) if address is not None]


def _info_address(info: tuple[Any, ...]) -> IPAddress | None:
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
