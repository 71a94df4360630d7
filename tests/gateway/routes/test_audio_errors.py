"""Transcription requests refused before any Triton call, and Triton's own failures, each an
OpenAI error object with its code."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.audio_samples import encode, speech_like
from tests.fakes.app import (
    AsgiCall,
    FakeGateway,
    assert_openai_error,
    chat,
    http_client,
    multipart,
)
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import API_KEY, BODY_CAP, Gateways

URL = "/v1/audio/transcriptions"
WAV = encode(speech_like(1.5, seed=4))


def form(**fields: str) -> dict:
    return {"model": "fake-whisper", **fields}


def upload(data: bytes = WAV, name: str = "file") -> dict:
    return {name: ("speech.wav", data, "audio/wav")}


@pytest.fixture
def refused(fake: FakeTriton):
    yield
    assert fake.requests == [], "a refused request reached Triton"


@pytest.mark.usefixtures("refused")
async def test_the_file_is_missing(http: httpx.AsyncClient) -> None:
    error = assert_openai_error(await http.post(URL, data=form(), files={}), 400)
    assert error["code"] == "invalid_content_type"  # no file: not even a multipart body
    response = await http.post(URL, files={"model": (None, b"fake-whisper")})
    error = assert_openai_error(response, 400, "invalid_request")
    assert error["param"] == "file" and "missing" in error["message"]


@pytest.mark.usefixtures("refused")
async def test_a_model_that_does_not_transcribe(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, data=form(model="fake-llava"), files=upload())
    error = assert_openai_error(response, 400, "invalid_model")
    assert error["param"] == "model"


@pytest.mark.usefixtures("refused")
async def test_an_unknown_model(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, data=form(model="whisper-9"), files=upload())
    assert assert_openai_error(response, 404, "model_not_found")["param"] == "model"


@pytest.mark.usefixtures("refused")
@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"timestamp_granularities[]": ["segment", "word"]}, "timestamp_granularities"),
        ({"stream": "true", "response_format": "srt"}, "stream"),
        ({"include[]": ["logprobs"]}, "include"),
        ({"known_speaker_names[]": ["ann"]}, "known_speaker_names"),
    ],
)
async def test_unsupported_parameters(http: httpx.AsyncClient, fields: dict, param: str) -> None:
    response = await http.post(URL, data=form(**fields), files=upload())
    error = assert_openai_error(response, 400, "unsupported_parameter")
    assert error["param"] == param


@pytest.mark.usefixtures("refused")
@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"response_format": "mp3"}, "response_format"),
        ({"temperature": "2"}, "temperature"),
        ({"timestamp_granularities[]": ["char"]}, "timestamp_granularities[0]"),
        ({"chunking_strategy": "manual"}, "chunking_strategy"),
        ({"chunking_strategy": "{not json"}, "chunking_strategy"),
        ({"chunking_strategy[type]": "client_vad"}, "chunking_strategy.type"),
        (
            {"chunking_strategy[type]": "server_vad", "chunking_strategy[threshold]": "2"},
            "chunking_strategy.threshold",
        ),
        (
            {"chunking_strategy[type]": "server_vad", "chunking_strategy[speed]": "1"},
            "chunking_strategy.speed",
        ),
        (
            {"chunking_strategy": "auto", "chunking_strategy[type]": "server_vad"},
            "chunking_strategy",
        ),
    ],
)
async def test_invalid_fields_are_named(http: httpx.AsyncClient, fields: dict, param: str) -> None:
    response = await http.post(URL, data=form(**fields), files=upload())
    assert assert_openai_error(response, 400, "invalid_request")["param"] == param


@pytest.mark.usefixtures("refused")
async def test_a_language_whisper_does_not_know(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, data=form(language="klingon"), files=upload())
    error = assert_openai_error(response, 400, "unsupported_language")
    assert error["param"] == "language"


@pytest.mark.usefixtures("refused")
async def test_a_second_file_field_is_refused(http: httpx.AsyncClient) -> None:
    files = [("file", ("a.wav", WAV, "audio/wav")), ("other", ("b.wav", WAV, "audio/wav"))]
    response = await http.post(URL, data=form(), files=files)
    assert_openai_error(response, 400, "invalid_request")


@pytest.mark.usefixtures("refused")
@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "invalid_media"),
        (b"this is not audio at all, just some text" * 10, "unsupported_media_type"),
    ],
    ids=["empty", "not-audio"],
)
async def test_audio_that_cannot_be_decoded(
    http: httpx.AsyncClient, data: bytes, code: str
) -> None:
    response = await http.post(URL, data=form(), files=upload(data))
    error = assert_openai_error(response, 400, code)
    assert "Traceback" not in error["message"]


@pytest.mark.usefixtures("refused")
async def test_audio_over_the_duration_limit(gateways: Gateways, fake: FakeTriton) -> None:
    strict = await gateways.get("strict")  # max_audio_duration_s = 1
    async with http_client(strict.app) as http:
        response = await http.post(URL, data=form(), files=upload())
    error = assert_openai_error(response, 400, "media_too_large")
    assert "limit of 1" in error["message"], error


@pytest.mark.usefixtures("refused")
async def test_a_body_over_the_cap(gateways: Gateways, fake: FakeTriton) -> None:
    guarded = await gateways.get("guarded")
    auth = {"Authorization": f"Bearer {API_KEY}"}
    async with http_client(guarded.app, headers=auth) as http:
        response = await http.post(URL, data=form(), files=upload(bytes(BODY_CAP)))
        assert_openai_error(response, 413, "request_too_large")

        body, headers = multipart(form(), upload(bytes(2 * BODY_CAP)))

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: caught while streaming
            for start in range(0, len(body), 512):
                yield body[start : start + 512]

        response = await http.post(URL, content=chunks(), headers=headers)
        assert "content-length" not in response.request.headers
        assert_openai_error(response, 413, "request_too_large")


@pytest.mark.parametrize("stream", ["false", "true"])
async def test_an_unreachable_triton_is_a_503(
    http: httpx.AsyncClient, fake: FakeTriton, stream: str
) -> None:
    fake.down = True
    response = await http.post(URL, data=form(stream=stream, language="en"), files=upload())
    assert_openai_error(response, 503, "upstream_unavailable")


@pytest.mark.parametrize("stream", ["false", "true"])
async def test_a_failed_window_before_any_text_is_a_502(
    http: httpx.AsyncClient, fake: FakeTriton, stream: str
) -> None:
    fake.script.fail_after = 0
    response = await http.post(URL, data=form(stream=stream, language="en"), files=upload())
    error = assert_openai_error(response, 502, "upstream_failed")
    assert fake.script.error in error["message"]


async def test_a_failure_after_the_first_text_is_an_error_event(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.fail_after = 5
    response = await http.post(URL, data=form(stream="true", language="en"), files=upload())
    assert response.status_code == 200
    *deltas, last = response.text.strip().split("\n\n")
    assert deltas and all('"transcript.text.delta"' in d for d in deltas)
    assert last.startswith('data: {"error":') and '"upstream_failed"' in last


async def test_leaving_a_json_transcription_cancels_its_triton_call(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 2
    body, headers = multipart(form(language="en"), upload())
    call = AsgiCall(gateway.app, URL, body, headers | {"X-Request-Id": "t1"})
    task = asyncio.create_task(call.run())
    await fake.wait_started("t1-w0")
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("t1-w0")
    assert call.status == 499


def audio_url(url: str) -> dict:
    return {"type": "audio_url", "audio_url": {"url": url}}


@pytest.mark.usefixtures("refused")
async def test_a_chat_audio_url_to_a_private_address(http: httpx.AsyncClient) -> None:
    body = chat([audio_url("http://127.0.0.1/x.wav")], "fake-whisper")
    error = assert_openai_error(
        await http.post("/v1/chat/completions", json=body), 400, "invalid_audio_url"
    )
    assert "not a public internet address" in error["message"]


@pytest.mark.usefixtures("refused")
async def test_the_refused_audio_part_of_a_chat_request_is_named(http: httpx.AsyncClient) -> None:
    body = chat(
        [{"type": "text", "text": "hi"}, audio_url("http://127.0.0.1/x.wav")], "fake-whisper"
    )
    error = assert_openai_error(await http.post("/v1/chat/completions", json=body), 400)
    assert error["param"] == "messages[0].content[1]"


@pytest.mark.usefixtures("refused")
async def test_a_chat_request_with_two_clips_to_a_speech_model(http: httpx.AsyncClient) -> None:
    clip = audio_url("data:audio/wav;base64," + base64.b64encode(WAV).decode())
    body = chat([clip, clip], "fake-whisper")
    error = assert_openai_error(
        await http.post("/v1/chat/completions", json=body), 400, "too_many_media_items"
    )
    assert "2 audio clips" in error["message"]
