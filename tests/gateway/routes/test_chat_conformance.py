"""Conformance with OpenAI's published schema and behaviour, and vLLM's extensions: nullable
fields, stream_options only with stream, "usage": null before the last chunk, fresh seeds,
ignore_eos honoured, the extensions the engine cannot honour refused by name."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.app import assert_openai_error, chat, data_url, png, sse_payloads
from tests.fakes.triton import FakeTriton

URL = "/v1/chat/completions"


async def test_null_stream_and_n_mean_absent(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    response = await http.post(URL, json=chat(stream=None, n=None))
    assert response.status_code == 200, response.text
    assert response.json()["object"] == "chat.completion"


async def test_stream_options_need_stream(http: httpx.AsyncClient) -> None:
    for stream in (False, None):
        body = chat(stream=stream, stream_options={"include_usage": True})
        error = assert_openai_error(await http.post(URL, json=body), 400, "invalid_request")
        assert error["message"] == (
            "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        )
        assert error["param"] == "stream_options"


async def test_with_include_usage_every_chunk_but_the_last_has_null_usage(
    http: httpx.AsyncClient,
) -> None:
    body = chat(stream=True, stream_options={"include_usage": True})
    chunks = sse_payloads((await http.post(URL, json=body)).text)[:-1]
    assert all(chunk["usage"] is None for chunk in chunks[:-1])
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    plain = sse_payloads((await http.post(URL, json=chat(stream=True))).text)[:-1]
    assert not any("usage" in chunk for chunk in plain)


async def test_sampled_requests_without_a_seed_get_distinct_ones(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    for _ in range(3):
        assert (await http.post(URL, json=chat(temperature=1.0))).status_code == 200
    seeds = [request.scalar("random_seed") for request in fake.requests]
    assert len(set(seeds)) == 3
    assert (await http.post(URL, json=chat(temperature=1.0, seed=7))).status_code == 200
    assert fake.requests[-1].scalar("random_seed") == 7
    assert (await http.post(URL, json=chat(temperature=0))).status_code == 200
    assert "random_seed" not in fake.requests[-1].inputs  # greedy: a seed changes nothing


async def test_ignore_eos_sends_end_id_minus_one(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    assert (await http.post(URL, json=chat(ignore_eos=True))).status_code == 200
    assert fake.requests[-1].scalar("end_id") == -1
    assert (await http.post(URL, json=chat())).status_code == 200
    assert fake.requests[-1].scalar("end_id") != -1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("use_beam_search", True),
        ("best_of", 2),
        ("prompt_logprobs", 1),
        ("include_stop_str_in_output", True),
        ("skip_special_tokens", False),
        ("min_p", 0.1),
        ("guided_whitespace_pattern", "\\s*"),
        ("chat_template", "{{ messages }}"),
    ],
)
async def test_vllm_extensions_not_honoured_are_refused_by_name(
    http: httpx.AsyncClient, fake: FakeTriton, field: str, value: object
) -> None:
    error = assert_openai_error(
        await http.post(URL, json=chat(**{field: value})), 400, "unsupported_parameter"
    )
    assert error["param"] == field
    assert not fake.requests
    # Sent at their default they change nothing, and are accepted.
    defaults = {"use_beam_search": False, "skip_special_tokens": True, "best_of": None}
    if field in defaults:
        assert (await http.post(URL, json=chat(**{field: defaults[field]}))).status_code == 200


async def test_continuous_usage_stats_is_refused(http: httpx.AsyncClient) -> None:
    body = chat(stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True})
    error = assert_openai_error(await http.post(URL, json=body), 400, "unsupported_parameter")
    assert error["param"] == "stream_options.continuous_usage_stats"


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "You are terse."}],
        [{"role": "system", "content": "a"}, {"role": "developer", "content": "b"}],
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "now answer in French"},
            {"role": "user", "content": "and then?"},
        ],
    ],
    ids=["system-only", "system-and-developer-only", "system-after-turns"],
)
async def test_system_messages_anywhere_are_accepted_as_openai_does(
    http: httpx.AsyncClient, fake: FakeTriton, messages: list
) -> None:
    response = await http.post(URL, json={"model": "fake-llava", "messages": messages})
    assert response.status_code == 200, response.text
    prompt = fake.requests[-1].inputs["text_input"].reshape(-1)[0].decode()
    for message in messages:
        assert message["content"] in prompt  # every message's text reaches the model


async def test_n_choices_each_a_request_of_its_own_with_its_own_seed(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(
        URL, json=chat(n=3, temperature=0.8, seed=40), headers={"X-Request-Id": "three"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    answer = "".join(fake.script.tokens)
    assert [(c["index"], c["message"]["content"]) for c in body["choices"]] == [
        (i, answer) for i in range(3)
    ]
    assert sorted(r.request_id for r in fake.requests) == ["three-0", "three-1", "three-2"]
    assert sorted(r.scalar("random_seed") for r in fake.requests) == [40, 41, 42]
    assert body["usage"]["completion_tokens"] == 3 * len(fake.script.tokens)


async def test_n_choices_stream_interleaved_with_their_own_index(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = chat(n=3, stream=True, stream_options={"include_usage": True})
    events = sse_payloads((await http.post(URL, json=body)).text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    roles = [c for c in chunks if c["choices"] and "role" in c["choices"][0]["delta"]]
    assert sorted(c["choices"][0]["index"] for c in roles) == [0, 1, 2]
    for index in range(3):
        mine = [
            c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["index"] == index
        ]
        text = "".join(c["delta"].get("content") or "" for c in mine)
        assert text == "".join(fake.script.tokens)
        assert [c["finish_reason"] for c in mine if c["finish_reason"]] == ["stop"]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 3 * len(fake.script.tokens)


async def test_too_many_choices_is_a_400(http: httpx.AsyncClient) -> None:
    error = assert_openai_error(await http.post(URL, json=chat(n=17)), 400, "invalid_request")
    assert error["param"] == "n"


@pytest.mark.parametrize("detail", ["auto", "low", "high", "original", None])
async def test_every_image_detail_of_openais_types_is_accepted(
    http: httpx.AsyncClient, fake: FakeTriton, detail: str | None
) -> None:
    # openai.types.chat.ChatCompletionContentPartImageParam: auto, low, high, original. The
    # family's own preprocessing sizes the image whatever the detail.
    part = {"type": "image_url", "image_url": {"url": data_url(png()), "detail": detail}}
    response = await http.post(URL, json=chat([{"type": "text", "text": "What?"}, part]))
    assert response.status_code == 200, response.text
    assert fake.requests[-1].inputs["image_input"] is not None


async def test_an_image_detail_outside_openais_types_is_named(http: httpx.AsyncClient) -> None:
    part = {"type": "image_url", "image_url": {"url": data_url(png()), "detail": "ultra"}}
    response = await http.post(URL, json=chat([part]))
    error = assert_openai_error(response, 400, "invalid_request")
    assert "detail" in (error["param"] or "")
