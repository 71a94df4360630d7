"""The chat page's static side: served with a strict CSP, offline, no HTML sinks in its code.

The behaviour (streaming, Stop, attachments, script tags staying text) is driven in a real
browser by tests/e2e/test_browser.py.
"""

from __future__ import annotations

import re

import httpx
import pytest

from gateway.app import create_app
from gateway.config import Settings
from gateway.routes.ui import FILES, UI_DIR

# Every way a string can become markup or code in a page.
HTML_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
    r"createContextualFragment|DOMParser|srcdoc"
)


@pytest.fixture
async def client():
    transport = httpx.ASGITransport(app=create_app(Settings()))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def test_index_is_served_with_a_strict_content_security_policy(client) -> None:
    response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert '<script src="/ui/app.js"' in response.text


@pytest.mark.parametrize("name", sorted(FILES))
async def test_each_asset_is_served_with_its_type(client, name: str) -> None:
    response = await client.get(f"/ui/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == FILES[name]


@pytest.mark.parametrize("path", ["/ui/nope.js", "/ui/..%2Fapp.py", "/ui/../routes/ui.py"])
async def test_only_listed_files_are_served(client, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 404
    assert "import" not in response.text


def test_the_page_needs_nothing_from_the_network() -> None:
    """No CDN, font or analytics: the page must work on an offline machine."""
    for name in FILES:
        text = (UI_DIR / name).read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), name
        assert "@import" not in text, name


def test_no_html_sinks_in_the_page_code() -> None:
    for name in ("app.js", "markdown.js", "mic.js", "mic-worklet.js"):
        found = HTML_SINKS.findall((UI_DIR / name).read_text())
        assert not found, f"{name} uses {found}"
    assert "<script>" not in (UI_DIR / "index.html").read_text()  # no inline script


def test_the_page_is_small_enough_to_read() -> None:
    total = sum(len((UI_DIR / name).read_text().splitlines()) for name in FILES)
    assert total < 800  # 700 before the microphone's two files (about 200 lines)
