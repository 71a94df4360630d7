"""Against the real Triton: an image URL on a real HTTP server that answers 404, the service
serving normally after bad requests, the model list and health.

Refusals decided before any Triton call (bad JSON, unknown model, schema violations, refused
parameters, bad media, the SSRF matrix, body caps) are tested in-process against a fake Triton
in tests/gateway/routes/."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import REFERENCE_FAMILIES, MediaServer

pytestmark = pytest.mark.e2e


def _image_request(url: str, model: str = "reference-llava") -> dict:
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],
        "max_tokens": 2,
    }


def assert_openai_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if code is not None:
        assert error["code"] == code
    return error


@pytest.fixture
async def http(gateway_url: str):
    async with httpx.AsyncClient(base_url=gateway_url, timeout=60) as client:
        yield client


async def test_image_url_that_404s(http: httpx.AsyncClient, media_server: MediaServer) -> None:
    response = await http.post(
        "/v1/chat/completions", json=_image_request(media_server.url("missing.png"))
    )
    error = assert_openai_error(response, 400)
    assert "404" in error["message"]


async def test_service_keeps_serving_after_bad_requests(http: httpx.AsyncClient) -> None:
    for _ in range(3):
        await http.post("/v1/chat/completions", content=b"{")
    response = await http.post(
        "/v1/chat/completions",
        json={
            "model": "reference-llava",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
        },
    )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["role"] == "assistant"


async def test_models_and_health(http: httpx.AsyncClient) -> None:
    models = (await http.get("/v1/models")).json()
    served = {m["id"] for m in models["data"]}
    families = {f"reference-{family.replace('_', '-')}" for family in REFERENCE_FAMILIES}
    assert {"reference-llava", "reference-llava-onevision", *families} <= served
    assert (await http.get("/health")).status_code == 200
