"""Reasoning models on chat completions: ``reasoning_content`` split from ``content`` (vLLM's
fields), streamed and not, read back through the official ``openai`` SDK; the reasoning
tokens counted; tools, guides, log probabilities and ``reasoning_effort`` with a reasoning
parser on. The fake Triton is scripted with what a reasoning model writes (tags cut across
tokens, as a tokenizer may cut them)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from gateway.families.reasoning import REASONING_PARSERS
from gateway.pipeline.chat import prepare_chat
from gateway.protocol.chat import ChatCompletionRequest
from tests.fakes.app import FakeGateway, sse_payloads
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.test_chat_tools import HERMES_ANSWER, TOOLS

URL = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
# DeepSeek-R1: the prompt opened <think>; the end tag comes cut in two.
R1_ANSWER = ("Let", " me", " think", "</th", "ink>", "\n\nIt", " is", " 4.")
R1_REASONING, R1_CONTENT = "Let me think", "\n\nIt is 4."
R1_REASONING_TOKENS = 5  # the pieces up to and with the end tag (one token each)


@pytest.fixture
async def client(gateway: FakeGateway) -> AsyncIterator[openai.AsyncOpenAI]:
    transport = httpx.ASGITransport(app=gateway.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="unused", http_client=http)


async def test_a_whole_answer_splits_reasoning_from_content(
    client: openai.AsyncOpenAI, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    completion = await client.chat.completions.create(model="fake-r1", messages=MESSAGES)
    message = completion.choices[0].message
    assert message.content == R1_CONTENT
    assert getattr(message, "reasoning_content", None) == R1_REASONING  # an extra field
    usage = completion.usage
    assert usage is not None and usage.completion_tokens == len(R1_ANSWER)
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == R1_REASONING_TOKENS


async def test_a_streamed_answer_sends_reasoning_deltas_then_content(
    client: openai.AsyncOpenAI, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    stream = await client.chat.completions.create(
        model="fake-r1", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    reasoning, content, order, usage = [], [], [], None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            thought = getattr(choice.delta, "reasoning_content", None)
            if thought:
                reasoning.append(thought)
                order.append("reasoning")
                assert choice.delta.content is None  # vLLM's shape: one field per delta
            if choice.delta.content:
                content.append(choice.delta.content)
                order.append("content")
    assert "".join(reasoning) == R1_REASONING and "".join(content) == R1_CONTENT
    assert order == sorted(order, key=["reasoning", "content"].index)
    assert not any("<" in piece or ">" in piece for piece in reasoning + content)  # no tag leaks
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == R1_REASONING_TOKENS


async def test_reasoning_cut_by_max_tokens_leaves_content_null(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    body = {"model": "fake-r1", "messages": MESSAGES, "max_tokens": 3}
    message = (await http.post(URL, json=body)).json()["choices"][0]["message"]
    assert message["content"] is None and message["reasoning_content"] == "Let me think"
    response = await http.post(URL, json={**body, "stream": True})
    deltas = [p["choices"][0]["delta"] for p in sse_payloads(response.text)[:-1] if p["choices"]]
    assert [d.get("content") for d in deltas if d.get("content")] == []
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "Let me think"


async def test_a_qwen3_answer_without_thinking_is_all_content(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = ("Paris", " is", " <think>", " big.")
    body = (await http.post(URL, json={"model": "fake-qwen3", "messages": MESSAGES})).json()
    message = body["choices"][0]["message"]
    assert message["content"] == "Paris is <think> big." and "reasoning_content" not in message
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 0}


async def test_a_model_without_a_parser_answers_as_before(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    body = (await http.post(URL, json={"model": "fake-llava", "messages": MESSAGES})).json()
    assert body["choices"][0]["message"]["content"] == "".join(R1_ANSWER)
    assert "reasoning_content" not in body["choices"][0]["message"]
    assert "completion_tokens_details" not in body["usage"]


async def test_the_tool_parser_sees_only_the_answer(
    client: openai.AsyncOpenAI, fake: FakeTriton
) -> None:
    """Call markup inside the reasoning is reasoning text, not a call."""
    thinking = ["<think>", "Maybe <tool_call>", '{"name": "ping"}</tool_call>?', "</think>"]
    fake.script.tokens = [*thinking, *HERMES_ANSWER]
    completion = await client.chat.completions.create(
        model="fake-qwen3", messages=MESSAGES, tools=TOOLS
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [call.function.name for call in choice.message.tool_calls or ()] == [
        "get_weather",
        "get_time",
    ]
    reasoning = getattr(choice.message, "reasoning_content", None)
    assert reasoning == 'Maybe <tool_call>{"name": "ping"}</tool_call>?'


async def test_a_guide_on_an_output_that_starts_in_reasoning_is_refused(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = {"model": "fake-r1", "messages": MESSAGES, "response_format": {"type": "json_object"}}
    response = await http.post(URL, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "response_format" and "reasoning" in error["message"]
    assert not fake.requests


async def test_a_guide_shapes_a_qwen3_output_whole(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """Triton's guide covers the whole output: a regex with the <think> block is honoured and
    the parser splits what it shaped (docs/reasoning.md)."""
    fake.script.tokens = ("<think>", "hm", "</think>", "yes")
    pattern = "<think>[a-z]+</think>(yes|no)"
    body = {"model": "fake-qwen3", "messages": MESSAGES, "guided_regex": pattern}
    response = await http.post(URL, json=body)
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("hm", "yes")
    (request,) = fake.requests
    assert request.scalar("guided_decoding_guide") == pattern


@pytest.mark.parametrize(
    ("model", "effort", "words"),
    [
        ("fake-llava", "high", "not served as a reasoning model"),
        ("fake-r1", "low", "no reasoning switch"),
        ("fake-r1", "none", "no reasoning switch"),
        ("fake-llava", "enormous", "Input should be"),
    ],
)
async def test_reasoning_effort_is_refused_where_nothing_honours_it(
    http: httpx.AsyncClient, fake: FakeTriton, model: str, effort: str, words: str
) -> None:
    body = {"model": model, "messages": MESSAGES, "reasoning_effort": effort}
    response = await http.post(URL, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "reasoning_effort" and words in error["message"], error
    assert not fake.requests


async def test_reasoning_effort_none_asks_a_plain_model_for_what_it_does(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = {"model": "fake-llava", "messages": MESSAGES, "reasoning_effort": "none"}
    assert (await http.post(URL, json=body)).status_code == 200


async def test_log_probabilities_cover_every_token_in_order(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """Non-streamed, as vLLM: ``logprobs.content`` lists every generated token (reasoning
    first); streamed, each delta carries the tokens that wrote it, tags with the reasoning."""
    fake.script.tokens = R1_ANSWER
    fake.script.log_probs = [-0.1 * (i + 1) for i in range(len(R1_ANSWER))]
    body = {"model": "fake-r1", "messages": MESSAGES, "logprobs": True}
    whole = (await http.post(URL, json=body)).json()["choices"][0]
    listed = [entry["token"] for entry in whole["logprobs"]["content"]]
    assert listed == list(R1_ANSWER)
    response = await http.post(URL, json={**body, "stream": True})
    sides: dict[str, list[str]] = {"reasoning_content": [], "content": []}
    for payload in sse_payloads(response.text)[:-1]:
        for choice in payload["choices"]:
            side = "reasoning_content" if "reasoning_content" in choice["delta"] else "content"
            for entry in (choice["logprobs"] or {}).get("content") or ():
                sides[side].append(entry["token"])
    assert sides["reasoning_content"] == list(R1_ANSWER[:5])
    assert sides["content"] == list(R1_ANSWER[5:])


async def test_several_choices_sum_their_reasoning_tokens(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = R1_ANSWER
    body = {"model": "fake-r1", "messages": MESSAGES, "n": 2, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    payloads = sse_payloads((await http.post(URL, json=body)).text)
    usage: dict[str, Any] = payloads[-2]["usage"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 2 * R1_REASONING_TOKENS}
    for index in (0, 1):
        deltas = [c["delta"] for p in payloads[:-1] for c in p["choices"] if c["index"] == index]
        assert "".join(d.get("reasoning_content", "") for d in deltas) == R1_REASONING
        assert "".join(d.get("content") or "" for d in deltas) == R1_CONTENT
    assert json.dumps(payloads).count("</think>") == 0


@pytest.mark.parametrize(("switch", "status"), [(False, 400), (True, 200)])
async def test_a_rendering_with_a_switch_is_handed_the_effort(
    gateway: FakeGateway, monkeypatch: pytest.MonkeyPatch, switch: bool, status: int
) -> None:
    """The hook for a chat template's enable_thinking: the checked effort reaches the draft."""
    family = type(gateway.runtime.model("fake-r1").family)
    monkeypatch.setattr(family, "reasoning_switch", switch)
    request = ChatCompletionRequest.model_validate(
        {"model": "fake-r1", "messages": [{"role": "user", "content": "hi"}],
         "reasoning_effort": "low"}
    )  # fmt: skip
    if status == 400:
        with pytest.raises(Exception, match="no reasoning switch"):
            await prepare_chat(
                request, gateway.runtime.model(request.model), gateway.runtime.preparation
            )
        return
    (prepared,) = await prepare_chat(
        request, gateway.runtime.model(request.model), gateway.runtime.preparation
    )
    assert prepared.plan.calls[0].reasoning_effort == "low"  # type: ignore[union-attr]
    assert prepared.reasoning is not None
    assert prepared.reasoning.format is REASONING_PARSERS["deepseek_r1"]
