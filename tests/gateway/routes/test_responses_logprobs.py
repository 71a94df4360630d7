"""Token log probabilities on /v1/responses (``include: ["message.output_text.logprobs"]`` and
``top_logprobs``), over the fake Triton's log-prob outputs (docs/triton-contract.md section 8):
the output_text part, each delta event and the done event carry them, in OpenAI's shape."""

from __future__ import annotations

import httpx
import pytest
from openai.types.responses import Response

from tests.fakes.triton import FakeTriton
from tests.fakes.vocabulary import WORDS, token_id
from tests.gateway.routes.test_responses import ask, events

URL = "/v1/responses"
INCLUDE = ["message.output_text.logprobs"]


def _rows(fake: FakeTriton) -> None:
    fake.script.logits = [
        [2.0 if i == token_id(token) else 0.1 * i for i in range(len(WORDS))]
        for token in fake.script.tokens
    ]


async def test_the_output_text_lists_each_token_with_its_alternatives(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    _rows(fake)
    body = ask(include=INCLUDE, top_logprobs=2, max_output_tokens=3, store=False)
    response = Response.model_validate((await http.post(URL, json=body)).json())
    part = response.output[0].content[0]
    assert [entry.token for entry in part.logprobs] == list(fake.script.tokens[:3])
    assert [entry.logprob for entry in part.logprobs] == pytest.approx(fake.script.log_probs[:3])
    assert all(len(entry.top_logprobs) == 2 for entry in part.logprobs)
    assert [e.top_logprobs[0].token for e in part.logprobs] == list(fake.script.tokens[:3])
    assert response.top_logprobs == 2


async def test_streamed_deltas_carry_their_own_tokens_and_done_carries_all(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = ask(include=INCLUDE, stream=True, store=False)
    stream = events((await http.post(URL, json=body)).text)
    deltas = [e for e in stream if e["type"] == "response.output_text.delta"]
    assert all("".join(t["token"] for t in d["logprobs"]) == d["delta"] for d in deltas)
    (done,) = [e for e in stream if e["type"] == "response.output_text.done"]
    assert [t["token"] for t in done["logprobs"]] == list(fake.script.tokens)
    assert all(t["top_logprobs"] == [] for t in done["logprobs"])


async def test_without_include_nothing_is_computed(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = ask(top_logprobs=3, store=False)
    response = await http.post(URL, json=body, headers={"X-Request-Id": "plain"})
    assert response.json()["output"][0]["content"][0]["logprobs"] == []
    assert fake.request("plain").scalar("return_log_probs") is None
