"""The chat page in a real browser (Playwright driving Debian's Chromium) against the gateway.

Real answers come from the co-launched reference models. Their text is meaningless, and a
sampled end token can end it early, so where a test needs a long answer it adds
``min_tokens`` to the page's request on the way out (the page sends ``max_tokens`` from its
setting). Where the exact answer matters (a script tag in model output) the answer is a
canned SSE stream. Screenshots land in ``artifacts/browser/`` (gitignored) for CI to keep.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import make_image

playwright_api = pytest.importorskip(
    "playwright.async_api", reason="playwright is not installed: pip install -e '.[dev]'"
)

# The first test also pays for installing Chromium on a fresh machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
MODEL = "reference-llava"
# Lengths of the last answer's text each time the DOM changes, with a timestamp.
RECORD_LENGTHS = """() => {
  window.__lengths = [];
  new MutationObserver(() => {
    const bodies = document.querySelectorAll('.message.assistant .body');
    const last = bodies[bodies.length - 1];
    if (last) window.__lengths.push([performance.now(), last.textContent.length]);
  }).observe(document.getElementById('conversation'),
             {subtree: true, childList: true, characterData: true});
}"""


@pytest.fixture
async def page(browser: Any, gateway_url: str) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1100, "height": 800})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    await opened.goto(gateway_url + "/")
    await opened.wait_for_selector(f"#model option[value='{MODEL}']", state="attached")
    try:
        yield opened
    finally:
        await context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


async def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    await page.screenshot(path=str(path), full_page=True)
    return path


async def add_min_tokens(page: Any, min_tokens: int) -> list[dict]:
    """Let the page's requests through with ``min_tokens`` added; returns what was sent."""
    sent: list[dict] = []

    async def handle(route: Any) -> None:
        body = json.loads(route.request.post_data)
        sent.append(body)
        await route.continue_(post_data=json.dumps({**body, "min_tokens": min_tokens}))

    await page.route("**/v1/chat/completions", handle)
    return sent


async def ask(page: Any, text: str, max_tokens: int) -> Any:
    await page.select_option("#model", MODEL)
    await page.fill("#max-tokens", str(max_tokens))
    await page.fill("#prompt", text)
    await page.click("#send")
    return page.locator(".message.assistant").last


async def metric(gateway_url: str, line_start: str) -> float:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as http:
        text = (await http.get("/metrics")).text
    values = [
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)
    ]
    return sum(values)


async def test_pick_a_model_attach_an_image_and_watch_the_answer_stream(page: Any) -> None:
    sent = await add_min_tokens(page, 400)
    await page.set_input_files(
        "#file", files=[{"name": "red.png", "mimeType": "image/png", "buffer": make_image(1)}]
    )
    await page.wait_for_selector("#attachments figure img")
    await page.evaluate(RECORD_LENGTHS)
    answer = await ask(page, "What is in this picture?", max_tokens=400)
    await answer.and_(page.locator("[data-state=done]")).wait_for(timeout=120_000)

    parts = sent[0]["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "What is in this picture?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert sent[0]["stream"] is True and sent[0]["stream_options"] == {"include_usage": True}
    lengths = [n for _, n in await page.evaluate("window.__lengths")]
    final = len(await answer.locator(".body").text_content())
    growing = sorted({n for n in lengths if 0 < n < final})
    assert len(growing) >= 5, f"the answer did not arrive incrementally: {lengths[:20]}"
    meta = await answer.locator(".meta").text_content()
    assert "first token" in meta and "tokens/s" in meta and "400 completion" in meta
    await page.locator(".message.user figure img").wait_for()
    await screenshot(page, "chat-streamed-answer.png")


async def test_stop_ends_a_long_answer_and_cancels_it_upstream(page: Any, gateway_url: str) -> None:
    cancelled_before = await metric(gateway_url, 'mmgw_requests_total{code="cancelled"')
    await add_min_tokens(page, 3500)  # about 10 s of tokens on the reference model
    answer = await ask(page, "Tell me a very long story.", max_tokens=3500)
    body = answer.locator(".body")
    last_body = "document.querySelector('.message.assistant:last-child .body')"
    await page.wait_for_function(f"() => {last_body}.textContent.length > 20")
    assert await answer.get_attribute("data-state") == "streaming"
    await page.click("#stop")
    await answer.and_(page.locator("[data-state=stopped]")).wait_for(timeout=5_000)
    assert await page.is_enabled("#send") and await page.is_disabled("#stop")
    stopped_at = len(await body.text_content())
    await asyncio.sleep(0.5)
    assert len(await body.text_content()) == stopped_at, "text kept arriving after Stop"
    assert "stopped" in await answer.locator(".meta").text_content()
    await screenshot(page, "chat-stopped.png")
    for _ in range(100):  # the gateway sees the disconnect and cancels the Triton stream
        in_flight = await metric(gateway_url, "mmgw_in_flight_requests ")
        cancelled = await metric(gateway_url, 'mmgw_requests_total{code="cancelled"')
        if in_flight == 0 and cancelled > cancelled_before:
            break
        await asyncio.sleep(0.1)
    assert in_flight == 0 and cancelled > cancelled_before


async def test_bad_requests_are_explained_in_words(page: Any) -> None:
    answer = await ask(page, "hello", max_tokens=999_999)
    await answer.and_(page.locator("[data-state=error]")).wait_for(timeout=30_000)
    message = await answer.locator(".error").text_content()
    assert "The request was rejected (HTTP 400)" in message and "max_tokens" in message

    await page.set_input_files(
        "#file", files=[{"name": "fake.png", "mimeType": "image/png", "buffer": b"not a png" * 9}]
    )
    answer = await ask(page, "and this?", max_tokens=8)
    await answer.and_(page.locator("[data-state=error]")).wait_for(timeout=30_000)
    assert "image 1 of 1" in await answer.locator(".error").text_content()
    await screenshot(page, "chat-errors.png")


CANNED_ANSWER = (
    'Here: <script>window.__pwned = "model"</script> and <img src=x '
    "onerror=\"window.__pwned = 'img'\"> and **bold**"
)


def canned_sse(text: str) -> str:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text[i : i + 9]}}]}
        for i in range(0, len(text), 9)
    ]
    usage = {
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12},
    }
    return "".join(f"data: {json.dumps(c)}\n\n" for c in [*chunks, usage]) + "data: [DONE]\n\n"


async def test_script_tags_in_file_names_and_model_output_stay_text(page: Any) -> None:
    await page.route(
        "**/v1/chat/completions",
        lambda route: route.fulfill(
            status=200, content_type="text/event-stream", body=canned_sse(CANNED_ANSWER)
        ),
    )
    png = base64.b64encode(make_image(4, (32, 32))).decode()
    names = [
        '<script>window.__pwned="name"</script>.png',
        '<img src=x onerror="window.__pwned=1">.png',
    ]
    await page.evaluate(  # dropped, as a user drags files onto the composer
        """([png, names]) => {
          const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
          const transfer = new DataTransfer();
          for (const name of names) {
            transfer.items.add(new File([bytes], name, {type: 'image/png'}));
          }
          document.getElementById('composer').dispatchEvent(
            new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true}));
        }""",
        [png, names],
    )
    await page.wait_for_function(
        "() => document.querySelectorAll('#attachments figure').length === 2"
    )
    answer = await ask(page, "<b>not bold</b>", max_tokens=8)
    await answer.and_(page.locator("[data-state=done]")).wait_for(timeout=30_000)

    assert await page.evaluate("window.__pwned") is None
    assert "<script>" in await answer.locator(".body").text_content()
    assert await answer.locator(".body strong").text_content() == "bold"  # Markdown, built safely
    assert await page.locator(".message .body script, .message .body img").count() == 0
    captions = await page.locator(".message.user figcaption").all_text_contents()
    assert captions == names
    assert await page.locator(".message.user .body").text_content() == "<b>not bold</b>"
    await screenshot(page, "chat-script-tags-as-text.png")


async def test_video_audio_paste_and_api_key_are_sent_as_the_api_expects(page: Any) -> None:
    sent: list[tuple[dict, dict]] = []

    async def capture(route: Any) -> None:
        sent.append((route.request.headers, json.loads(route.request.post_data)))
        await route.fulfill(status=200, content_type="text/event-stream", body=canned_sse("ok"))

    await page.route("**/v1/chat/completions", capture)
    await page.fill("#api-key", "sk-test-key")
    await page.set_input_files(
        "#file",
        files=[
            {"name": "clip.mp4", "mimeType": "video/mp4", "buffer": b"\x00\x00\x00\x18ftypmp42"},
            {"name": "voice.wav", "mimeType": "audio/wav", "buffer": b"RIFF\x24\x00\x00\x00WAVE"},
        ],
    )
    png = base64.b64encode(make_image(5, (16, 16))).decode()
    await page.evaluate(  # pasted, as from the clipboard
        """(png) => {
          const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
          const transfer = new DataTransfer();
          transfer.items.add(new File([bytes], 'pasted.png', {type: 'image/png'}));
          const init = {clipboardData: transfer, bubbles: true, cancelable: true};
          document.getElementById('prompt').dispatchEvent(new ClipboardEvent('paste', init));
        }""",
        png,
    )
    await page.wait_for_function(
        "() => document.querySelectorAll('#attachments figure').length === 3"
    )
    answer = await ask(page, "Describe the clip and the sound.", max_tokens=8)
    await answer.and_(page.locator("[data-state=done]")).wait_for(timeout=30_000)

    headers, body = sent[0]
    assert headers["authorization"] == "Bearer sk-test-key"
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "video_url", "input_audio", "image_url"]
    assert parts[1]["video_url"]["url"].startswith("data:video/mp4;base64,")
    assert parts[2]["input_audio"]["format"] == "wav"
    assert base64.b64decode(parts[2]["input_audio"]["data"]).startswith(b"RIFF")
    assert parts[3]["image_url"]["url"].startswith("data:image/png;base64,")
