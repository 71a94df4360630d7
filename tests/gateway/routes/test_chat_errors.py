"""Chat requests refused before any Triton call: a 4xx whose body is exactly one OpenAI error
object, with the code the README lists, and nothing sent to Triton."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes.app import FakeGateway, assert_openai_error, chat, http_client
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import API_KEY, BODY_CAP, Gateways

URL = "/v1/chat/completions"


@pytest.fixture(autouse=True)
def nothing_reaches_triton(fake: FakeTriton):
    yield
    assert fake.requests == [], "a refused request reached Triton"


async def test_malformed_json(http: httpx.AsyncClient) -> None:
    response = await http.post(
        URL, content=b'{"model": "x", "messages": [', headers={"content-type": "application/json"}
    )
    error = assert_openai_error(response, 400, "invalid_request")
    assert "JSON" in error["message"]


async def test_an_empty_body(http: httpx.AsyncClient) -> None:
    error = assert_openai_error(await http.post(URL, content=b"  "), 400, "invalid_request")
    assert "empty" in error["message"]


async def test_unknown_model(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, json=chat(model="no-such-model"))
    error = assert_openai_error(response, 404, "model_not_found")
    assert error["param"] == "model"
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"temperature": 7}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"seed": -1}, "seed"),
        ({"messages": []}, "messages"),
        ({"stop": [""]}, "stop"),
        ({"stop": [str(i) for i in range(17)]}, "stop"),
        ({"model": ""}, "model"),
        ({"media_io_kwargs": {"video": {"frames": 4}}}, "media_io_kwargs.video.frames"),
    ],
)
async def test_schema_violation_names_the_parameter(
    http: httpx.AsyncClient, fields: dict, param: str
) -> None:
    error = assert_openai_error(await http.post(URL, json=chat(**fields)), 400, "invalid_request")
    assert error["param"] == param


async def test_a_missing_required_field_is_named(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, json={"messages": [{"role": "user", "content": "hi"}]})
    error = assert_openai_error(response, 400, "invalid_request")
    assert error["param"] == "model" and "required" in error["message"].lower()


async def test_max_tokens_over_the_cap(http: httpx.AsyncClient, gateway: FakeGateway) -> None:
    cap = gateway.runtime.settings.generation.max_tokens
    response = await http.post(URL, json=chat(max_tokens=cap + 1))
    error = assert_openai_error(response, 400, "invalid_request")
    assert error["param"] == "max_tokens" and str(cap) in error["message"]
    response = await http.post(URL, json=chat(max_completion_tokens=cap + 1))
    assert assert_openai_error(response, 400)["param"] == "max_completion_tokens"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ],
)
async def test_parameters_the_engine_cannot_honour_are_refused(
    http: httpx.AsyncClient, extra: dict, param: str
) -> None:
    body = {"model": "fake-llava", "messages": [{"role": "user", "content": "hi"}]}
    response = await http.post(URL, json=body | extra | {"max_tokens": 2})
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
    body = {"model": "fake-llava", "messages": [{"role": "user", "content": content}]}
    error = assert_openai_error(await http.post(URL, json=body), 400)
    assert error["param"] == param
    assert words in error["message"]
    assert "more problem" not in error["message"]  # union alternatives are not extra problems


async def test_reserved_marker_in_user_text(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, json=chat("look <image> here"))
    error = assert_openai_error(response, 400, "reserved_marker")
    assert error["param"] == "messages" and "<image>" in error["message"]


async def test_a_reserved_marker_in_the_system_text_is_refused_too(http: httpx.AsyncClient) -> None:
    body = chat(model="fake-onevision")
    body["messages"].insert(0, {"role": "system", "content": "<|im_start|>system"})
    assert_openai_error(await http.post(URL, json=body), 400, "reserved_marker")


async def test_a_family_that_needs_an_image_refuses_text_only(http: httpx.AsyncClient) -> None:
    error = assert_openai_error(
        await http.post(URL, json=chat(model="fake-blip2")), 400, "image_required"
    )
    assert error["param"] == "messages" and "blip2_opt" in error["message"]


async def test_a_speech_model_needs_audio(http: httpx.AsyncClient) -> None:
    error = assert_openai_error(
        await http.post(URL, json=chat(model="fake-whisper")), 400, "audio_required"
    )
    assert error["param"] == "messages"


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "system", "content": ""}], "messages"),
        ([{"role": "user", "content": ""}], "messages[0]"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "messages"),
    ],
    ids=["no-text-at-all", "empty-message", "assistant-last"],
)
async def test_conversations_the_model_cannot_take(
    http: httpx.AsyncClient, messages: list, param: str
) -> None:
    body = {"model": "fake-llava", "messages": messages}
    error = assert_openai_error(await http.post(URL, json=body), 400, "invalid_request")
    assert error["param"] == param


async def test_media_in_an_assistant_message_is_refused(http: httpx.AsyncClient) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = {
        "model": "fake-llava",
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [image]},
            {"role": "user", "content": "b"},
        ],
    }
    error = assert_openai_error(await http.post(URL, json=body), 400, "invalid_request")
    assert error["param"] == "messages[1].content[0]"


@pytest.fixture
async def guarded(gateways: Gateways, fake: FakeTriton) -> AsyncIterator[httpx.AsyncClient]:
    gateway = await gateways.get("guarded")
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with http_client(gateway.app, headers=headers) as client:
        yield client


async def test_a_body_declared_over_the_cap(guarded: httpx.AsyncClient) -> None:
    body = chat("x" * BODY_CAP)
    error = assert_openai_error(await guarded.post(URL, json=body), 413, "request_too_large")
    assert str(BODY_CAP) in error["message"]


async def test_a_body_streamed_past_the_cap_without_a_length(guarded: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"model": "fake-llava", "messages": [{"role": "user", "content": "'
        for _ in range(BODY_CAP // 512 + 1):
            yield b"y" * 512
        yield b'"}]}'

    response = await guarded.post(URL, content=chunks())
    assert "content-length" not in response.request.headers
    assert_openai_error(response, 413, "request_too_large")


async def test_a_body_under_the_cap_is_served(guarded: httpx.AsyncClient, fake: FakeTriton) -> None:
    response = await guarded.post(URL, json=chat("x" * (BODY_CAP // 2), max_tokens=1))
    assert response.status_code == 200
    fake.requests.clear()  # it did reach Triton, as it should


async def test_caps_on_what_costs_work_or_is_echoed(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """A megabyte of stop string, a prompt no engine can take, a huge model id, a boolean
    where an integer goes: each a 400 before Triton sees anything."""
    long_stop = await http.post(URL, json=chat(stop=["x" * 1_000_000]))
    assert_openai_error(long_stop, 400, "invalid_request")
    assert len(long_stop.content) < 2048
    prompt = await http.post(URL, json=chat("word " * 300_000))  # 1.5 M characters
    error = assert_openai_error(prompt, 400, "context_length_exceeded")
    assert error["param"] == "messages"
    model = await http.post(URL, json=chat(model="m" * 1_000_000))
    assert_openai_error(model, 400, "invalid_request")
    assert len(model.content) < 2048  # the value is not echoed back
    for field, value in (("max_tokens", True), ("stream", "yes"), ("n", 1.5), ("seed", "7")):
        error = assert_openai_error(await http.post(URL, json=chat(**{field: value})), 400)
        assert error["param"] == field, (field, error)


async def test_n_copies_of_a_long_prompt_are_refused_before_triton(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """Issue 22 item 5: one Triton request goes out per choice, so the cap is on them all."""
    reply = await http.post(URL, json=chat("word " * 180_000, n=16))  # 900K characters x 16
    error = assert_openai_error(reply, 400, "context_length_exceeded")
    assert error["param"] == "n" and not fake.requests
