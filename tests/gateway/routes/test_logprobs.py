"""Log probabilities on /v1/chat/completions and /v1/completions over the fake Triton.

The fake streams TensorRT-LLM's log-prob outputs as the contract gives them
(docs/triton-contract.md section 8: ``output_log_probs`` [1, 1, n] holding every token so far,
``generation_logits`` [1, 1, 1, vocab] for the response's own token); fake-llava's deployment
declares them and its tokenizer (tests/fakes/vocabulary.py) names the logits' ids.
"""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest

from tests.audio_samples import encode, speech_like
from tests.fakes.app import assert_openai_error, chat, sse_payloads
from tests.fakes.triton import FakeTriton
from tests.fakes.vocabulary import WORDS, token_id

CHAT = "/v1/chat/completions"
CLIP = base64.b64encode(encode(speech_like(0.5))).decode()
SPEECH = [{"type": "input_audio", "input_audio": {"format": "wav", "data": CLIP}}]
COMPLETIONS = "/v1/completions"


def _script_logits(fake: FakeTriton) -> list[list[float]]:
    """A logits row per scripted token over the fake vocabulary: its own id a little below
    the top (so alternatives rank above it), the others distinct (no ties to order)."""
    rows = []
    for index, token in enumerate(fake.script.tokens):
        row = [0.4 * ((i * 7 + index) % len(WORDS)) for i in range(len(WORDS))]
        row[token_id(token)] = 3.5
        rows.append(row)
    fake.script.logits = rows
    return rows


def _top(row: list[float], count: int) -> list[tuple[str, float]]:
    values = np.asarray(row, np.float64)
    log_probs = values - np.log(np.exp(values).sum())
    order = np.argsort(-log_probs, kind="stable")[:count]
    return [(WORDS[i], float(log_probs[i])) for i in order]


async def test_chat_logprobs_are_the_engine_s_per_token_values(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(CHAT, json=chat(logprobs=True), headers={"X-Request-Id": "lp"})
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert [entry["token"] for entry in content] == list(fake.script.tokens)
    expected = fake.script.log_probs[: len(fake.script.tokens)]
    assert [entry["logprob"] for entry in content] == pytest.approx(expected)
    assert all(entry["bytes"] == list(entry["token"].encode()) for entry in content)
    assert all(entry["top_logprobs"] == [] for entry in content)
    assert choice["logprobs"]["refusal"] is None
    sent = fake.request("lp")
    assert sent.scalar("return_log_probs") is True
    assert sent.scalar("return_generation_logits") is None  # no alternatives, no logits


async def test_top_logprobs_rank_the_log_softmax_of_the_generation_logits(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    rows = _script_logits(fake)
    body = chat(logprobs=True, top_logprobs=3)
    response = await http.post(CHAT, json=body, headers={"X-Request-Id": "top"})
    content = response.json()["choices"][0]["logprobs"]["content"]
    assert fake.request("top").scalar("return_generation_logits") is True
    for entry, row in zip(content, rows, strict=True):
        top = [(alt["token"], alt["logprob"]) for alt in entry["top_logprobs"]]
        assert [name for name, _ in top] == [name for name, _ in _top(row, 3)]
        assert [value for _, value in top] == pytest.approx([v for _, v in _top(row, 3)])


async def test_streamed_chunks_carry_the_tokens_of_their_own_text(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    _script_logits(fake)
    body = chat(logprobs=True, top_logprobs=1, stream=True)
    response = await http.post(CHAT, json=body)
    chunks = [p for p in sse_payloads(response.text) if p != "[DONE]" and p["choices"]]
    scored = [c["choices"][0] for c in chunks if c["choices"][0]["logprobs"] is not None]
    assert len(scored) == len(fake.script.tokens)
    for choice in scored:
        tokens = [entry["token"] for entry in choice["logprobs"]["content"]]
        assert "".join(tokens) == choice["delta"]["content"]
        assert all(len(entry["top_logprobs"]) == 1 for entry in choice["logprobs"]["content"])


@pytest.mark.parametrize(
    ("stop", "text", "tokens"),
    [
        (" engine", "The fake", ["The", " fake"]),  # the stop starts on a token boundary
        ("ke en", "The fa", ["The", " fake"]),  # ... or inside a token, which is kept
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_stop_string_drops_the_tokens_it_cut_off(
    http: httpx.AsyncClient, stop: str, text: str, tokens: list[str], stream: bool
) -> None:
    response = await http.post(CHAT, json=chat(logprobs=True, stop=stop, stream=stream))
    if stream:
        payloads = [p for p in sse_payloads(response.text) if p != "[DONE]" and p["choices"]]
        choices = [p["choices"][0] for p in payloads]
        content = "".join(c["delta"].get("content", "") for c in choices)
        entries = [e for c in choices if c["logprobs"] for e in c["logprobs"]["content"]]
    else:
        choice = response.json()["choices"][0]
        content, entries = choice["message"]["content"], choice["logprobs"]["content"]
    assert content == text
    assert [entry["token"] for entry in entries] == tokens


async def test_n_choices_each_carry_their_own_tokens(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(CHAT, json=chat(logprobs=True, n=2, stream=True))
    payloads = [p for p in sse_payloads(response.text) if p != "[DONE]" and p["choices"]]
    per_choice: dict[int, list[str]] = {0: [], 1: []}
    for payload in payloads:
        choice = payload["choices"][0]
        if choice["logprobs"]:
            per_choice[choice["index"]] += [e["token"] for e in choice["logprobs"]["content"]]
    assert per_choice == {0: list(fake.script.tokens), 1: list(fake.script.tokens)}


async def test_completions_logprobs_list_the_chosen_token_among_the_top(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    rows = _script_logits(fake)
    body = {"model": "fake-llava", "prompt": "Once", "logprobs": 2, "max_tokens": 3}
    logprobs = (await http.post(COMPLETIONS, json=body)).json()["choices"][0]["logprobs"]
    tokens = list(fake.script.tokens[:3])
    assert logprobs["tokens"] == tokens
    assert logprobs["token_logprobs"] == pytest.approx(fake.script.log_probs[:3])
    assert logprobs["text_offset"] == [0, 3, 8]
    for chosen, value, top, row in zip(
        tokens, fake.script.log_probs, logprobs["top_logprobs"], rows, strict=False
    ):
        expected = dict(_top(row, 2))
        expected.setdefault(chosen, value)  # OpenAI: up to logprobs + 1 entries
        assert top == pytest.approx(expected)


async def test_streamed_completion_offsets_run_on_across_chunks(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = {"model": "fake-llava", "prompt": "Once", "logprobs": 0, "stream": True}
    payloads = [p for p in sse_payloads((await http.post(COMPLETIONS, json=body)).text)]
    scored = [p["choices"][0]["logprobs"] for p in payloads[:-1] if p["choices"][0]["logprobs"]]
    offsets = [offset for chunk in scored for offset in chunk["text_offset"]]
    starts = np.cumsum([0, *map(len, fake.script.tokens)])[: len(fake.script.tokens)]
    assert offsets == starts.tolist()
    assert all(len(top) == 1 for chunk in scored for top in chunk["top_logprobs"])


async def test_no_probability_at_all_is_the_floor_not_infinity(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.log_probs = (float("-inf"),) * len(fake.script.tokens)
    response = await http.post(CHAT, json=chat(logprobs=True, max_tokens=2))
    values = [e["logprob"] for e in response.json()["choices"][0]["logprobs"]["content"]]
    assert values == [-9999.0, -9999.0]


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        (chat(top_logprobs=2), "top_logprobs", "logprobs set to true"),
        (chat(logprobs=True, top_logprobs=21), "top_logprobs", "20"),
        (chat(model="fake-minimal", logprobs=True), "logprobs", "'return_log_probs'"),
        (chat(model="fake-onevision", logprobs=True, top_logprobs=1), "logprobs", "tokenizer"),
        (chat(SPEECH, model="fake-whisper", logprobs=True), "logprobs", "'output_log_probs'"),
    ],
)
async def test_what_cannot_be_answered_is_a_400_that_says_why(
    http: httpx.AsyncClient, fake: FakeTriton, body: dict, param: str, words: str
) -> None:
    error = assert_openai_error(await http.post(CHAT, json=body), 400)
    assert error["param"] == param and words in error["message"], error
    assert not fake.requests


async def test_log_probs_without_alternatives_need_no_tokenizer(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(CHAT, json=chat(model="fake-onevision", logprobs=True))
    assert response.status_code == 200, response.text
    assert len(response.json()["choices"][0]["logprobs"]["content"]) == len(fake.script.tokens)
