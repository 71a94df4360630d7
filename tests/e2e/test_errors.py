"""Bad input gets a 4xx OpenAI error object, and the service keeps serving."""

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


async def test_malformed_json(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/chat/completions",
        content=b'{"model": "x", "messages": [',
        headers={"content-type": "application/json"},
    )
    error = assert_openai_error(response, 400)
    assert "JSON" in error["message"]


async def test_unknown_model(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/chat/completions",
        json={"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]},
    )
    error = assert_openai_error(response, 404, "model_not_found")
    assert error["param"] == "model"


async def test_schema_violation_names_the_parameter(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/chat/completions",
        json={
            "model": "reference-llava",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 7,
        },
    )
    error = assert_openai_error(response, 400)
    assert error["param"] == "temperature"


async def test_image_url_that_404s(http: httpx.AsyncClient, media_server: MediaServer) -> None:
    response = await http.post(
        "/v1/chat/completions", json=_image_request(media_server.url("missing.png"))
    )
    error = assert_openai_error(response, 400)
    assert "404" in error["message"]


async def test_bytes_that_are_not_an_image(
    http: httpx.AsyncClient, media_server: MediaServer
) -> None:
    response = await http.post(
        "/v1/chat/completions", json=_image_request(media_server.url("not-an-image.png"))
    )
    assert_openai_error(response, 400)


async def test_streaming_request_with_bad_image_fails_before_streaming(
    http: httpx.AsyncClient, media_server: MediaServer
) -> None:
    body = _image_request(media_server.url("missing.png")) | {"stream": True}
    response = await http.post("/v1/chat/completions", json=body)
    assert_openai_error(response, 400)


async def test_reserved_marker_in_user_text(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/chat/completions",
        json={
            "model": "reference-llava",
            "messages": [{"role": "user", "content": "look <image> here"}],
        },
    )
    assert_openai_error(response, 400, "reserved_marker")


async def test_unknown_route_is_an_openai_error(http: httpx.AsyncClient) -> None:
    assert_openai_error(await http.get("/v1/nothing-here"), 404)


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


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
    ],
)
async def test_parameters_the_engine_cannot_honour_are_refused(
    http: httpx.AsyncClient, extra: dict, param: str
) -> None:
    body = {"model": "reference-llava", "messages": [{"role": "user", "content": "hi"}]}
    response = await http.post("/v1/chat/completions", json=body | extra | {"max_tokens": 2})
    error = assert_openai_error(response, 400, "unsupported_parameter")
    assert error["param"] == param


@pytest.mark.parametrize(
    ("content", "param", "words"),
    [
        ([{"type": "foo"}], "messages[0].content[0]", "'image_url'"),
        (
            [{"type": "image_url", "image_url": {}}],
            "messages[0].content[0].image_url.url",
            "required",
        ),
        (5, "messages[0].content", "valid string or"),
    ],
)
async def test_a_bad_content_part_is_named_precisely(
    http: httpx.AsyncClient, content: object, param: str, words: str
) -> None:
    body = {"model": "reference-llava", "messages": [{"role": "user", "content": content}]}
    error = assert_openai_error(await http.post("/v1/chat/completions", json=body), 400)
    assert error["param"] == param
    assert words in error["message"]
    assert "more problem" not in error["message"]  # union alternatives are not extra problems


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
        ("POST", "/v1/embeddings", 404, "not_found"),
    ],
)
async def test_routing_errors_are_openai_errors_with_their_own_code(
    http: httpx.AsyncClient, method: str, path: str, status: int, code: str
) -> None:
    error = assert_openai_error(await http.request(method, path), status, code)
    assert error["type"] == "invalid_request_error"
