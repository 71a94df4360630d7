"""Pinned-IP fetches need one connection pool per TLS host name; this transport keeps them.

Room-private to ``fetch.py``: it knows nothing of SSRF rules, only of pooling.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import httpx

TLS_POOLS = 32  # connection pools kept per TLS host name


class PerHostTransport(httpx.AsyncBaseTransport):
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
        while len(self._pools) > TLS_POOLS:
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
