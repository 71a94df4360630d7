"""PDF documents and ``detail`` end to end: the OpenAI SDK, the gateway, the session's Triton.

A two-page PDF (a page of text, a page with a picture) goes to the reference LLaVA (which
takes several images) in chat and in Responses; the prompt grows by one image's features per
page. On the reference LLaVA-OneVision, ``detail: "low"`` sends one tile's worth of pixels and
the usage's image tokens are exactly the prompt positions the model gave the image.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from openai import AsyncOpenAI

from tests.e2e.conftest import make_image
from tests.gateway.media.pdf_samples import deeply_nested_pdf, make_pdf, picture, two_page_pdf

pytestmark = pytest.mark.e2e

LLAVA = "reference-llava"
ONEVISION = "reference-llava-onevision"
LLAVA_FEATURES = 576  # the tiny CLIP-336 tower: 24 x 24 features per image


def pdf_url(pdf: bytes) -> str:
    return "data:application/pdf;base64," + base64.b64encode(pdf).decode()


@pytest.fixture
async def client(gateway_url: str) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(
        base_url=f"{gateway_url}/v1", api_key="x", max_retries=0, timeout=180
    ) as client:
        yield client


async def test_a_two_page_pdf_in_chat_and_responses(client: AsyncOpenAI) -> None:
    one_page = make_pdf(["Quarterly report\nRevenue grew by 12 percent."])
    usages = []
    for pdf in (one_page, two_page_pdf()):
        completion = await client.chat.completions.create(
            model=LLAVA,
            max_tokens=3,
            temperature=0,
            messages=[{"role": "user", "content": [
                {"type": "file", "file": {"file_data": pdf_url(pdf), "filename": "r.pdf"}},
                {"type": "text", "text": "Summarise."},
            ]}],
        )  # fmt: skip
        assert completion.choices[0].finish_reason in ("stop", "length")
        assert completion.usage is not None
        usages.append(completion.usage)
    one, two = usages
    assert one.prompt_tokens_details and two.prompt_tokens_details
    assert one.prompt_tokens_details.image_tokens == LLAVA_FEATURES
    assert two.prompt_tokens_details.image_tokens == 2 * LLAVA_FEATURES
    # The second page adds its features and its text layer ("[page 2]\nFigure 1").
    assert two.prompt_tokens > one.prompt_tokens + LLAVA_FEATURES
    response = await client.responses.create(
        model=LLAVA,
        max_output_tokens=3,
        temperature=0,
        input=[{"role": "user", "content": [
            {"type": "input_file", "file_data": pdf_url(two_page_pdf()), "filename": "r.pdf"},
            {"type": "input_text", "text": "Summarise."},
        ]}],
    )  # fmt: skip
    assert response.usage is not None and response.usage.input_tokens == two.prompt_tokens
    assert response.usage.input_tokens_details.model_extra == {"image_tokens": 2 * LLAVA_FEATURES}


async def test_a_hostile_pdf_leaves_the_service_serving(client: AsyncOpenAI) -> None:
    """A recursion bomb: rendered (PDFium bounds its own nesting) or refused, within seconds."""
    try:
        await client.chat.completions.create(
            model=LLAVA,
            max_tokens=2,
            messages=[{"role": "user", "content": [
                {"type": "file", "file": {"file_data": pdf_url(deeply_nested_pdf())}},
                {"type": "text", "text": "Read."},
            ]}],
        )  # fmt: skip
    except Exception as exc:  # a 400 is as good as an answer here; a 5xx is not
        assert getattr(exc, "status_code", 500) == 400, exc
    ok = await client.chat.completions.create(
        model=LLAVA,
        max_tokens=2,
        messages=[{"role": "user", "content": [
            {"type": "file", "file": {"file_data": pdf_url(make_pdf([picture()]))}},
        ]}],
    )  # fmt: skip
    assert ok.choices[0].finish_reason in ("stop", "length")


async def test_detail_low_costs_fewer_image_tokens_on_onevision(client: AsyncOpenAI) -> None:
    image = "data:image/png;base64," + base64.b64encode(make_image(9, (1000, 800))).decode()
    question = {"type": "text", "text": "What is this?"}
    text_only = await client.chat.completions.create(
        model=ONEVISION, max_tokens=1, messages=[{"role": "user", "content": [question]}]
    )
    assert text_only.usage is not None
    image_tokens = {}
    for detail in ("low", "high", "original"):
        completion = await client.chat.completions.create(
            model=ONEVISION,
            max_tokens=1,
            messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": image, "detail": detail}}, question,
            ]}],
        )  # fmt: skip
        usage = completion.usage
        assert usage is not None and usage.prompt_tokens_details is not None
        counted = usage.prompt_tokens_details.image_tokens
        assert counted is not None
        # What the family sent is what the model read: the prompt grew by exactly that much.
        assert usage.prompt_tokens - text_only.usage.prompt_tokens == counted, detail
        image_tokens[detail] = counted
    assert image_tokens["low"] < image_tokens["high"] == image_tokens["original"]
