"""POST /v1/completions over the fake Triton: the body and stream OpenAI defines, prompt lists,
echo, n, the default of 16 tokens, and the refusals (token ids, suffix, best_of, echo with
logprobs)."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.app import assert_openai_error, sse_payloads
from tests.fakes.triton import FakeTriton

URL = "/v1/completions"


def completion(prompt: object = "Once upon a time", **fields: object) -> dict:
    return {"model": "fake-llava", "prompt": prompt, **fields}


async def test_a_completion_is_the_prompt_as_sent_and_the_model_text(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, json=completion(), headers={"X-Request-Id": "c1"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert body["choices"] == [
        {"index": 0, "text": "".join(fake.script.tokens), "logprobs": None,
         "finish_reason": "stop"}
    ]  # fmt: skip
    sent = fake.request("c1")
    assert sent.inputs["text_input"].reshape(-1)[0].decode() == "Once upon a time"
    assert sent.scalar("max_tokens") == 16  # OpenAI's default for completions
    assert body["usage"]["completion_tokens"] == len(fake.script.tokens)


async def test_several_prompts_and_n_number_their_choices_as_openai_does(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = completion(["A", "B"], n=2, echo=True, temperature=0.5, seed=3)
    response = await http.post(URL, json=body, headers={"X-Request-Id": "many"})
    choices = response.json()["choices"]
    answer = "".join(fake.script.tokens)
    assert [(c["index"], c["text"]) for c in choices] == [
        (0, "A" + answer), (1, "A" + answer), (2, "B" + answer), (3, "B" + answer),
    ]  # fmt: skip
    prompts = {r.request_id: r.inputs["text_input"].reshape(-1)[0].decode() for r in fake.requests}
    assert prompts == {"many-0": "A", "many-1": "A", "many-2": "B", "many-3": "B"}
    seeds = {r.request_id: r.scalar("random_seed") for r in fake.requests}
    assert seeds == {"many-0": 3, "many-1": 4, "many-2": 3, "many-3": 4}


async def test_the_stream(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    body = completion(stream=True, echo=True, stream_options={"include_usage": True})
    events = sse_payloads((await http.post(URL, json=body)).text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "text_completion" for c in chunks)
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"]]
    assert texts[0] == "Once upon a time"  # echo first
    assert "".join(texts) == "Once upon a time" + "".join(fake.script.tokens)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


async def test_max_tokens_and_stop(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    fake.script.tokens = (" one", " two", " three", " four")
    cut = await http.post(URL, json=completion(max_tokens=2))
    assert cut.json()["choices"][0] == {
        "index": 0, "text": " one two", "logprobs": None, "finish_reason": "length"
    }  # fmt: skip
    stopped = await http.post(URL, json=completion(stop=" thr"))
    assert stopped.json()["choices"][0]["text"] == " one two"
    assert stopped.json()["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({"prompt": [1, 2, 3]}, "prompt", "unsupported_parameter"),
        ({"prompt": [[1, 2], [3]]}, "prompt", "unsupported_parameter"),
        ({"suffix": "the end"}, "suffix", "unsupported_parameter"),
        ({"best_of": 3}, "best_of", "unsupported_parameter"),
        ({"logprobs": 2, "echo": True}, "echo", "unsupported_parameter"),
        ({"prompt": []}, "prompt", "invalid_request"),
        ({"prompt": ["x"] * 17}, "prompt", "invalid_request"),
        ({"model": "fake-whisper"}, "model", "invalid_model"),
        ({"echo": "yes"}, "echo", "invalid_request"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "invalid_request"),
    ],
)
async def test_refusals(
    http: httpx.AsyncClient, fake: FakeTriton, fields: dict, param: str, code: str
) -> None:
    error = assert_openai_error(await http.post(URL, json=completion() | fields), 400, code)
    assert error["param"] == param
    assert not fake.requests


async def test_best_of_equal_to_n_is_accepted(http: httpx.AsyncClient) -> None:
    assert (await http.post(URL, json=completion(best_of=1))).status_code == 200


async def test_n_copies_of_long_prompts_are_refused_before_triton(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """Issue 22 item 5: 2 prompts of 900K characters with n=16 are 32 Triton requests of 900K
    characters each; the cap is on the total sent, and nothing is sent."""
    body = {"model": "fake-llava", "prompt": ["a" * 900_000, "b" * 900_000], "n": 16}
    error = assert_openai_error(await http.post(URL, json=body), 400, "context_length_exceeded")
    assert error["param"] == "n" and "max_total_prompt_chars" in error["message"]
    assert not fake.requests
    one = {"model": "fake-llava", "prompt": "a" * 1_100_000}
    error = assert_openai_error(await http.post(URL, json=one), 400, "context_length_exceeded")
    assert error["param"] == "prompt"  # the completions field, not chat's messages
    fits = {"model": "fake-llava", "prompt": ["a" * 900_000, "b" * 900_000], "n": 2}
    assert (await http.post(URL, json=fits)).status_code == 200
    assert len(fake.requests) == 4
