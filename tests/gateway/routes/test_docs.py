"""``/docs`` works offline (every asset from the gateway itself) and ``/version`` answers."""

from __future__ import annotations

import re

import httpx


async def test_docs_page_loads_everything_from_the_gateway(http: httpx.AsyncClient) -> None:
    page = await http.get("/docs")
    assert page.status_code == 200 and "swagger-ui" in page.text
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", page.text)
    found = [a or b for a, b in urls]
    assert found, page.text
    for url in found:
        assert url.startswith("/"), f"{url} is not served by the gateway"
        assert (await http.get(url)).status_code == 200, url
    assert (await http.get("/redoc")).status_code == 404  # it would need a CDN


async def test_version(http: httpx.AsyncClient) -> None:
    response = await http.get("/version")
    assert response.status_code == 200
    assert re.match(r"^\d+\.\d+", response.json()["version"])
