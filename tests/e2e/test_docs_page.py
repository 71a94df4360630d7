"""``/docs`` in a real browser (Debian's Chromium): Swagger UI renders the OpenAPI 3.1 document
FastAPI writes, lists the operations, and "Try it out" sends a request and shows the answer.

The page's own files must come from the gateway (the browser is offline: any request that
leaves the gateway is refused here, so a CDN fallback would fail the test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture
async def docs_page(browser: Any, gateway_url: str) -> AsyncIterator[tuple[Any, list[str]]]:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    errors: list[str] = []
    elsewhere: list[str] = []
    gateway = urlsplit(gateway_url).netloc

    async def offline(route: Any) -> None:
        if urlsplit(route.request.url).netloc == gateway:
            await route.continue_()
        else:
            elsewhere.append(route.request.url)
            await route.abort()

    await page.route("**/*", offline)
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(gateway_url + "/docs")
    try:
        yield page, errors
    finally:
        await context.close()
    assert not elsewhere, f"/docs reached beyond the gateway: {elsewhere}"


async def test_docs_lists_the_operations_and_tries_one(
    docs_page: tuple[Any, list[str]],
) -> None:
    page, errors = docs_page
    await page.wait_for_selector(".opblock", timeout=60_000)
    assert await page.locator(".errors-wrapper").count() == 0, await page.content()
    paths = await page.locator(".opblock-summary-path").all_text_contents()
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models"):
        assert any(p.replace("\u200b", "") == path for p in paths), paths

    models = page.locator(".opblock-get", has=page.locator("[data-path='/v1/models']"))
    await models.locator(".opblock-summary").first.click()
    await models.get_by_role("button", name="Try it out").click()
    await models.get_by_role("button", name="Execute").click()
    answer = models.locator(".live-responses-table tr.response")
    status = answer.locator(".response-col_status").first
    await status.wait_for(timeout=30_000)
    assert (await status.text_content()).strip() == "200"
    body = await answer.locator(".microlight").first.text_content()
    assert '"reference-llava"' in body
    assert not errors, errors
