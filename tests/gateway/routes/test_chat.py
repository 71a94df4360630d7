"""POST /v1/chat/completions against the fake Triton: the JSON body and its usage, the SSE
stream and its framing, stop strings, and what the gateway sends to Triton."""

from __future__ import annotations

import asyncio
import io

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.fakes.app import (
    TOKENS_PER_BLOCK,
    AsgiCall,
    FakeGateway,
    chat,
    data_url,
    image_part,
    png,
    sse_payloads,
)
from tests.fakes.triton import FakeTriton
from tests.fakes.triton_requests import ReceivedRequest

URL = "/v1/chat/completions"


def prompt_bytes(received: ReceivedRequest) -> int:
    """The fake's prompt token count: one per UTF-8 byte of the text_input it received."""
    return len(received.scalar("text_input").encode("utf-8"))


async def test_a_non_streamed_answer_is_a_chat_completion(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, json=chat(max_tokens=50))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert body["model"] == "fake-llava"
    answer = "".join(fake.script.tokens)
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": answer, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    (received,) = fake.requests
    completion = len(fake.script.tokens)
    assert body["usage"] == {
        "prompt_tokens": prompt_bytes(received),
        "completion_tokens": completion,
        "total_tokens": prompt_bytes(received) + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


async def test_max_tokens_cuts_the_answer_with_finish_reason_length(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, json=chat(max_completion_tokens=3))
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "".join(fake.script.tokens[:3])
    assert response.json()["usage"]["completion_tokens"] == 3
    assert fake.requests[0].scalar("max_tokens") == 3


async def test_without_max_tokens_the_engine_may_run_to_its_room(
    http: httpx.AsyncClient, fake: FakeTriton, gateway: FakeGateway
) -> None:
    """No small default (it was 256): the server cap where the engine's length is unknown;
    its max_seq_len where the deployment declares one (TensorRT-LLM reduces it to what the
    prompt leaves); a long answer then ends 'stop', not 'length'."""
    fake.script.tokens = tuple(f" w{i}" for i in range(300))
    reply = (await http.post(URL, json=chat())).json()
    assert fake.requests[0].scalar("max_tokens") == gateway.runtime.settings.generation.max_tokens
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] == 300
    await http.post(URL, json=chat(model="fake-minimal"))
    assert fake.requests[1].scalar("max_tokens") == 2048  # the model's max_seq_len parameter


@pytest.mark.parametrize(("model", "per_block"), [("fake-llava", 16), ("fake-onevision", 64)])
async def test_cached_tokens_are_reused_blocks_times_tokens_per_block(
    http: httpx.AsyncClient, fake: FakeTriton, model: str, per_block: int
) -> None:
    """fake-llava reads tokens_per_block (16) from its config; fake-onevision's setting (64)
    overrides the 16 its config says."""
    assert TOKENS_PER_BLOCK == 64
    fake.script.kv_cache_reused_blocks = 3
    response = await http.post(URL, json=chat(model=model))
    assert response.json()["usage"]["prompt_tokens_details"] == {"cached_tokens": 3 * per_block}


async def test_a_deployment_without_counters_gets_counted_tokens_and_no_details(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """fake-minimal declares no return_* flags: completion tokens are the responses counted,
    the prompt's are unknown (0), and no cached tokens are claimed."""
    response = await http.post(URL, json=chat(model="fake-minimal", max_tokens=4))
    assert response.json()["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 4,
        "total_tokens": 4,
    }


@pytest.mark.parametrize("include_usage", [True, False])
async def test_the_event_stream(
    http: httpx.AsyncClient, fake: FakeTriton, include_usage: bool
) -> None:
    body = chat(max_tokens=50, stream=True, stream_options={"include_usage": include_usage})
    response = await http.post(URL, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = payloads[:-1]
    assert {(c["id"], c["object"], c["model"]) for c in chunks} == {
        (chunks[0]["id"], "chat.completion.chunk", "fake-llava")
    }
    assert chunks[0]["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    usage = [c for c in chunks if c.get("usage") is not None]
    if include_usage:
        # OpenAI's rule: every chunk carries "usage", null in all but the last.
        assert all("usage" in c for c in chunks)
        assert chunks[-1] is usage[0] and usage[0]["choices"] == []
        received = fake.requests[0]
        completion = len(fake.script.tokens)
        assert usage[0]["usage"] == {
            "prompt_tokens": prompt_bytes(received),
            "completion_tokens": completion,
            "total_tokens": prompt_bytes(received) + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        chunks = chunks[:-1]
    else:
        assert usage == []
    assert chunks[-1]["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    ]
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert contents == list(fake.script.tokens)  # one content chunk per streamed token
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[1:-1])


async def test_a_stream_cut_by_max_tokens_finishes_with_length(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, json=chat(max_tokens=2, stream=True))
    chunks = sse_payloads(response.text)[:-1]
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]] == list(
        fake.script.tokens[:2]
    )
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


async def test_each_write_is_whole_frames(gateway: FakeGateway, fake: FakeTriton) -> None:
    """Frames ready together go out in one write (role with the first token; finish, usage and
    [DONE]); every other token is a write of its own, and no write splits a frame."""
    fake.script.tokens = ("a", "b", "c")
    fake.script.delay_s = 0.01
    body = chat(stream=True, stream_options={"include_usage": True})
    call = await AsgiCall(gateway.app, URL, body).run()
    assert call.status == 200 and call.finished
    frames_per_write = []
    for chunk in call.chunks:
        text = chunk.decode()
        assert text.startswith("data: ") and text.endswith("\n\n"), text
        frames_per_write.append(len(sse_payloads(text)))
    assert frames_per_write == [2, 1, 1, 3]
    assert sse_payloads(call.chunks[-1].decode())[-1] == "[DONE]"


async def test_a_stop_string_cuts_the_text_and_cancels_the_triton_request(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """The stop string straddles two tokens (as token-level stop words miss): the text ends
    before it, and the gateway leaves the Triton stream before its final response."""
    fake.script.tokens = ("Hello", " wor", "ld", "!", " More", " text")
    headers = {"X-Request-Id": "stop-1"}
    response = await http.post(URL, json=chat(stop="world", max_tokens=20), headers=headers)
    choice = response.json()["choices"][0]
    assert choice["message"]["content"] == "Hello "
    assert choice["finish_reason"] == "stop"
    assert "world" in fake.request("stop-1").strings("stop_words")
    assert await fake.wait_cancelled("stop-1")


async def test_a_streamed_stop_string_never_reaches_the_client(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.tokens = ("Hello", " wor", "ld", "!", " More")
    headers = {"X-Request-Id": "stop-2"}
    body = chat(stop=["xyz", "world"], stream=True)
    response = await http.post(URL, json=body, headers=headers)
    chunks = sse_payloads(response.text)[:-1]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "Hello "
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert await fake.wait_cancelled("stop-2")


async def test_an_answer_that_ends_by_itself_cancels_nothing(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    await http.post(URL, json=chat(stream=True), headers={"X-Request-Id": "whole-1"})
    assert fake.cancelled == []


async def test_the_request_id_header_becomes_tritons_request_id(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, json=chat(), headers={"X-Request-Id": "trace-7.a:b"})
    assert response.headers["x-request-id"] == "trace-7.a:b"
    assert fake.requests[0].request_id == "trace-7.a:b"


async def test_an_unsafe_request_id_is_replaced_by_a_fresh_one(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, json=chat(), headers={"X-Request-Id": "no spaces\tplease"})
    sent = fake.requests[0].request_id
    assert sent == response.headers["x-request-id"]
    assert len(sent) == 32 and int(sent, 16) >= 0


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # Greedy is TensorRT-LLM's top_k 1, for chat and speech alike; temperature is sent as
        # 1.0, which has no effect there (triton/tensors.sampling_values).
        ({"temperature": 0}, {"temperature": 1.0, "top_k": 1, "top_p": 0.0}),
        (
            {"temperature": 0.7, "top_p": 0.9, "top_k": 40},
            {"temperature": 0.7, "top_k": 40, "top_p": 0.9},
        ),
        ({}, {"temperature": 1.0, "top_k": 0, "top_p": 1.0}),
    ],
    ids=["greedy", "sampled", "defaults"],
)
async def test_sampling_reaches_triton_as_tensorrt_llm_reads_it(
    http: httpx.AsyncClient, fake: FakeTriton, fields: dict, expected: dict
) -> None:
    assert (await http.post(URL, json=chat(**fields))).status_code == 200
    received = fake.requests[0]
    for name, value in expected.items():
        assert received.scalar(name) == pytest.approx(value), name
    assert received.inputs["top_k"].dtype == np.int32
    assert received.inputs["temperature"].dtype == np.float32


@pytest.mark.parametrize(
    ("model", "seed_name", "min_name"),
    [("fake-llava", "random_seed", "min_length"), ("fake-onevision", "seed", "min_tokens")],
)
async def test_renamed_inputs_go_under_the_name_the_model_declares(
    http: httpx.AsyncClient, fake: FakeTriton, model: str, seed_name: str, min_name: str
) -> None:
    """v0.19 spells them random_seed/min_length, later releases seed/min_tokens; the fake
    refuses the spelling its model does not declare, as Triton does."""
    body = chat(
        model=model,
        seed=2**63 + 5,
        min_tokens=2,
        presence_penalty=0.5,
        frequency_penalty=-0.25,
        repetition_penalty=1.1,
    )
    assert (await http.post(URL, json=body)).status_code == 200
    received = fake.requests[0]
    assert received.scalar(seed_name) == 2**63 + 5
    assert received.inputs[seed_name].dtype == np.uint64
    assert received.scalar(min_name) == 2
    assert received.scalar("presence_penalty") == 0.5
    assert received.scalar("frequency_penalty") == -0.25
    assert received.scalar("repetition_penalty") == pytest.approx(1.1)


async def test_only_the_inputs_a_deployment_declares_are_sent(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = chat(model="fake-minimal", seed=1, stop=["x"], temperature=0.3, min_tokens=1)
    assert (await http.post(URL, json=body)).status_code == 200
    assert set(fake.requests[0].inputs) == {"text_input", "max_tokens", "stream"}


async def test_a_deployment_that_is_not_decoupled_gets_stream_false(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """Triton refuses stream=true there; its one response still streams to the client."""
    response = await http.post(URL, json=chat(model="fake-unary", stream=True))
    chunks = sse_payloads(response.text)[:-1]
    assert fake.requests[0].scalar("stream") is False
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert contents == ["".join(fake.script.tokens)]


@pytest.mark.parametrize(("model", "end_id"), [("fake-onevision", 151645), ("fake-llava", None)])
async def test_the_familys_end_id_is_sent_when_it_has_one(
    http: httpx.AsyncClient, fake: FakeTriton, model: str, end_id: int | None
) -> None:
    await http.post(URL, json=chat(model=model, stop=["END"]))
    received = fake.requests[0]
    assert received.scalar("end_id") == end_id
    assert received.strings("stop_words") == ["END"]


async def test_the_rendered_prompt_is_the_text_input(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """LLaVA's server adds USER:/ASSISTANT:; the gateway sends the system text and question."""
    body = chat()
    body["messages"].insert(0, {"role": "system", "content": "Be brief."})
    await http.post(URL, json=body)
    assert fake.requests[0].scalar("text_input") == "Be brief.\nHello?"


async def test_an_image_reaches_llava_as_clip_pixels_with_a_content_id(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    image = data_url(png(1))
    for _ in range(2):
        body = chat([{"type": "text", "text": "What is it?"}, image_part(image)])
        assert (await http.post(URL, json=body)).status_code == 200
    other = chat([{"type": "text", "text": "What is it?"}, image_part(data_url(png(2)))])
    assert (await http.post(URL, json=other)).status_code == 200
    first, again, different = fake.requests
    pixels = first.inputs["image_input"]
    assert pixels.dtype == np.float16 and pixels.shape == (1, 1, 3, 336, 336)
    ids = [r.scalar("prompt_table_extra_id") for r in (first, again, different)]
    assert ids[0] == ids[1] != ids[2]
    assert first.inputs["prompt_table_extra_id"].dtype == np.uint64 and ids[0] >= 1


async def test_an_image_reaches_onevision_as_its_raw_pixels(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    encoded = png(3, (40, 30))
    body = chat([image_part(data_url(encoded)), {"type": "text", "text": "?"}], "fake-onevision")
    assert (await http.post(URL, json=body)).status_code == 200
    sent = fake.requests[0].inputs["image_bytes_input"]
    expected = np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB"))
    assert sent.dtype == np.uint8 and sent.shape == (1, 1, 30, 40, 3)
    assert np.array_equal(sent[0, 0], expected)


async def test_concurrent_requests_each_get_their_own_answer(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.delay_s = 0.002
    bodies = [chat(f"question {i}", max_tokens=i + 1) for i in range(4)]
    responses = await asyncio.gather(*(http.post(URL, json=b) for b in bodies))
    contents = [r.json()["choices"][0]["message"]["content"] for r in responses]
    assert contents == ["".join(fake.script.tokens[: i + 1]) for i in range(4)]
    assert sorted(r.scalar("text_input") for r in fake.requests) == [
        f"question {i}" for i in range(4)
    ]
