"""When Triton fails: before the first token the status code says so (502, 503, or 400 for a
request the model rejects); after it, a streamed answer carries an ``error`` event then
``[DONE]`` under its 200."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.app import assert_openai_error, chat, http_client, sse_payloads, start_gateway
from tests.fakes.triton import FakeTriton
from tests.fakes.triton_configs import default_configs, ensemble_config

URL = "/v1/chat/completions"


@pytest.mark.parametrize("stream", [False, True])
async def test_an_error_before_the_first_token_is_a_502(
    http: httpx.AsyncClient, fake: FakeTriton, stream: bool
) -> None:
    fake.script.fail_after = 0
    response = await http.post(URL, json=chat(stream=stream))
    assert response.headers["content-type"] == "application/json"
    error = assert_openai_error(response, 502, "upstream_failed")
    assert fake.script.error in error["message"] and error["param"] is None


@pytest.mark.parametrize("stream", [False, True])
async def test_a_request_the_model_rejects_is_a_400(
    http: httpx.AsyncClient, fake: FakeTriton, stream: bool
) -> None:
    fake.script.fail_after = 0
    fake.script.error = "input length 5000 exceeds the maximum input length 4096"
    response = await http.post(URL, json=chat(stream=stream))
    error = assert_openai_error(response, 400, "model_rejected")
    assert "exceeds the maximum input length" in error["message"]


async def test_an_error_after_the_first_token_is_an_error_event_then_done(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.fail_after = 2
    response = await http.post(URL, json=chat(stream=True))
    assert response.status_code == 200
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    error = payloads[-2]
    assert set(error) == {"error"} and set(error["error"]) == {"message", "type", "param", "code"}
    assert error["error"]["code"] == "upstream_failed"
    assert error["error"]["type"] == "server_error"
    assert fake.script.error in error["error"]["message"]
    chunks = payloads[:-2]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:]]
    assert contents == list(fake.script.tokens[:2])  # no finish chunk: it did not finish


async def test_an_error_after_the_first_token_of_a_json_answer_is_a_502(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.fail_after = 2
    assert_openai_error(await http.post(URL, json=chat()), 502, "upstream_failed")


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unreachable_triton_is_a_503(
    http: httpx.AsyncClient, fake: FakeTriton, stream: bool
) -> None:
    fake.down = True
    error = assert_openai_error(
        await http.post(URL, json=chat(stream=stream)), 503, "upstream_unavailable"
    )
    assert "retry" in error["message"]


async def test_a_model_that_is_not_ready_is_a_503(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.unready.add("ensemble")
    assert_openai_error(await http.post(URL, json=chat()), 503, "upstream_unavailable")


async def test_a_triton_down_at_start_up_is_a_503_then_served_once_it_is_up() -> None:
    fake = FakeTriton()
    fake.down = True
    gateway = await start_gateway(fake)
    try:
        async with http_client(gateway.app) as http:
            response = await http.post(URL, json=chat())
            error = assert_openai_error(response, 503, "upstream_unavailable")
            assert "'ensemble'" in error["message"]
            fake.down = False
            assert (await http.post(URL, json=chat())).status_code == 200
        assert fake.config_reads.count("ensemble") >= 3  # start-up, the 503, the retry
    finally:
        await gateway.aclose()


async def test_a_deployment_without_the_required_inputs_is_a_503() -> None:
    configs = [c for c in default_configs() if c["name"] != "ensemble"]
    fake = FakeTriton([ensemble_config("ensemble", only=("text_input", "stream")), *configs])
    gateway = await start_gateway(fake)
    try:
        async with http_client(gateway.app) as http:
            error = assert_openai_error(
                await http.post(URL, json=chat()), 503, "upstream_unavailable"
            )
            assert "max_tokens" in error["message"]
            assert (await http.post(URL, json=chat(model="fake-onevision"))).status_code == 200
        assert [r.model for r in fake.requests] == ["ensemble_onevision"]
    finally:
        await gateway.aclose()
