"""POST /v1/responses against the fake Triton: the response object (checked with the OpenAI
SDK's own pydantic types), the event stream and its order, what reaches Triton, and the SDK's
``responses.create`` / ``responses.stream`` helpers in-process."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.audio_samples import encode, speech_like
from tests.fakes.app import AsgiCall, FakeGateway, data_url, png
from tests.fakes.triton import FakeTriton

URL = "/v1/responses"
EVENT = TypeAdapter(ResponseStreamEvent)
ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


def ask(input: Any = "Hello?", model: str = "fake-llava", **fields: Any) -> dict[str, Any]:
    return {"model": model, "input": input, **fields}


def events(text: str) -> list[dict[str, Any]]:
    """The stream's events: each ``event: <type>`` then one ``data:`` line of that type,
    each checked against the SDK's event union."""
    assert text.endswith("\n\n"), text[-80:]
    parsed = []
    for block in text[:-2].split("\n\n"):
        head, data = block.split("\n")
        assert head.startswith("event: ") and data.startswith("data: "), block
        payload = json.loads(data[len("data: ") :])
        assert payload["type"] == head[len("event: ") :]
        EVENT.validate_python(payload)
        parsed.append(payload)
    return parsed


def image_input(url: str, text: str = "What is this?") -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": text},
                {"type": "input_image", "image_url": url, "detail": "high"},
            ],
        }
    ]


async def test_a_response_is_openais_response_object(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    reply = await http.post(
        URL, json=ask(instructions="Answer briefly.", metadata={"k": "v"}, user="u1")
    )
    assert reply.status_code == 200, reply.text
    body = Response.model_validate(reply.json())
    assert body.id.startswith("resp_") and body.object == "response"
    assert body.status == "completed" and body.error is None
    assert body.output_text == "".join(fake.script.tokens)
    (message,) = body.output
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].annotations == []
    assert body.instructions == "Answer briefly." and body.metadata == {"k": "v"}
    assert body.user == "u1" and body.tools == [] and body.tool_choice == "auto"
    (received,) = fake.requests
    prompt = received.scalar("text_input")
    assert "Answer briefly." in prompt and "Hello?" in prompt  # instructions: the system turn
    usage = body.usage
    assert usage is not None
    assert usage.input_tokens == len(prompt.encode()) and usage.output_tokens == 7
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0


async def test_max_output_tokens_makes_the_response_incomplete(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    body = (await http.post(URL, json=ask(max_output_tokens=3))).json()
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["output"][0]["status"] == "incomplete"
    assert body["output"][0]["content"][0]["text"] == "".join(fake.script.tokens[:3])
    assert fake.requests[0].scalar("max_tokens") == 3


async def test_sampling_fields_reach_triton(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    reply = await http.post(URL, json=ask(temperature=0.5, top_p=0.9, seed=11))
    assert reply.status_code == 200
    received = fake.requests[0]
    assert received.scalar("temperature") == pytest.approx(0.5)
    assert received.scalar("top_p") == pytest.approx(0.9)
    assert int(received.scalar("seed" if "seed" in received.inputs else "random_seed")) == 11


async def test_chats_generation_extensions_are_honoured(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    reply = await http.post(URL, json=ask(top_k=3, stop=["engine"], repetition_penalty=1.1))
    assert reply.status_code == 200, reply.text
    assert reply.json()["output"][0]["content"][0]["text"] == "The fake "  # cut at the stop
    received = fake.requests[0]
    assert (
        int(received.scalar("runtime_top_k" if "runtime_top_k" in received.inputs else "top_k"))
        == 3
    )
    assert received.scalar("repetition_penalty") == pytest.approx(1.1)


async def test_the_stream_is_openais_event_sequence(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    reply = await http.post(URL, json=ask(stream=True))
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    stream = events(reply.text)
    kinds = [e["type"] for e in stream]
    deltas = len(fake.script.tokens)
    assert kinds == ORDER[:4] + ["response.output_text.delta"] * deltas + [
        *ORDER[5:],
        "response.completed",
    ]
    assert [e["sequence_number"] for e in stream] == list(range(len(stream)))
    assert (
        stream[0]["response"]["status"] == "in_progress" and stream[0]["response"]["output"] == []
    )
    text = "".join(e["delta"] for e in stream if e["type"] == "response.output_text.delta")
    assert text == "".join(fake.script.tokens)
    final = stream[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == text
    assert stream[-4]["text"] == text  # output_text.done
    # The stored response is the one the stream ended with.
    stored = (await http.get(f"{URL}/{final['id']}")).json()
    assert stored == final


async def test_a_cut_stream_ends_with_response_incomplete(http: httpx.AsyncClient) -> None:
    stream = events((await http.post(URL, json=ask(stream=True, max_output_tokens=2))).text)
    assert stream[-1]["type"] == "response.incomplete"
    assert stream[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_a_failure_after_the_first_token_is_response_failed(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.fail_after = 2
    stream = events((await http.post(URL, json=ask(stream=True))).text)
    last = stream[-1]
    assert last["type"] == "response.failed"
    assert last["sequence_number"] == len(stream) - 1
    assert last["response"]["status"] == "failed"
    error = last["response"]["error"]
    assert error["code"] == "server_error" and "upstream_failed" in error["message"]
    assert fake.script.error in error["message"]


async def test_a_failure_before_the_first_token_keeps_its_status(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.fail_after = 0
    reply = await http.post(URL, json=ask(stream=True))
    assert reply.status_code == 502
    assert reply.json()["error"]["code"] == "upstream_failed"


async def test_an_image_reaches_triton_and_continuing_reuses_its_kv_cache_id(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    first = await http.post(URL, json=ask(image_input(data_url(png(3))), model="fake-onevision"))
    assert first.status_code == 200, first.text
    follow = ask(
        "And the colours?", model="fake-onevision", previous_response_id=first.json()["id"]
    )
    second = await http.post(URL, json=follow)
    assert second.status_code == 200, second.text
    one, two = fake.requests
    assert one.inputs["image_bytes_input"].shape == two.inputs["image_bytes_input"].shape
    first_id = int(one.scalar("prompt_table_extra_id"))
    assert first_id != 0 and int(two.scalar("prompt_table_extra_id")) == first_id
    prompt = two.scalar("text_input")
    answer = "".join(fake.script.tokens)
    assert prompt.index("What is this?") < prompt.index(answer) < prompt.index("And the colours?")


async def test_cached_tokens_are_reported(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    fake.script.kv_cache_reused_blocks = 2
    body = (await http.post(URL, json=ask(model="fake-onevision"))).json()
    assert body["usage"]["input_tokens_details"]["cached_tokens"] == 2 * 64


async def test_a_conversation_goes_back_through_every_response(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    previous = None
    for turn in ("one", "two", "three"):
        reply = await http.post(URL, json=ask(f"turn {turn}", previous_response_id=previous))
        previous = reply.json()["id"]
    prompt = fake.requests[-1].scalar("text_input")
    assert prompt.index("turn one") < prompt.index("turn two") < prompt.index("turn three")
    assert prompt.count("".join(fake.script.tokens)) == 2


async def test_instructions_are_not_carried_into_a_continuation(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    first = await http.post(URL, json=ask(instructions="Speak like a pirate."))
    await http.post(URL, json=ask("again", previous_response_id=first.json()["id"]))
    assert "pirate" not in fake.requests[1].scalar("text_input")


async def test_the_sdk_creates_and_streams_through_its_helpers(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    transport = httpx.ASGITransport(app=gateway.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway/v1") as http:
        client = AsyncOpenAI(base_url="http://gateway/v1", api_key="unused", http_client=http)
        created = await client.responses.create(model="fake-llava", input="Hi", temperature=0)
        seen: list[str] = []
        async with client.responses.stream(model="fake-llava", input="Hi", temperature=0) as s:
            async for event in s:
                seen.append(event.type)
            final = await s.get_final_response()
        listed = await client.responses.input_items.list(final.id)
        await client.responses.delete(created.id)
    assert created.output_text == final.output_text == "".join(fake.script.tokens)
    assert seen[0] == "response.created" and seen[-1] == "response.completed"
    assert final.usage is not None and created.usage is not None
    assert final.usage.output_tokens == created.usage.output_tokens
    assert [item.type for item in listed.data] == ["message"]


async def test_leaving_mid_stream_cancels_triton_and_stores_nothing(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 2
    call = AsgiCall(gateway.app, URL, ask(stream=True), {"X-Request-Id": "resp-gone"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(2)  # the opening events with the first delta, then the second
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("resp-gone")
    created = events(call.chunks[0].decode())[0]
    assert created["type"] == "response.created"
    assert (await gateway.runtime.store.get(created["response"]["id"], "")) is None


@pytest.mark.parametrize("stream", [False, True])
async def test_audio_goes_to_a_speech_model(
    http: httpx.AsyncClient, fake: FakeTriton, stream: bool
) -> None:
    """``input_audio`` (and an audio clip as ``input_file``) reach the family that takes them:
    a Whisper model answers with the transcript, as in chat."""
    wav = base64.b64encode(encode(speech_like(1.0), "wav")).decode()
    content = [
        {"type": "input_text", "text": "ignored by a speech model"},
        {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}},
    ]
    as_file = [{"type": "input_file", "file_data": f"data:audio/wav;base64,{wav}"}]
    for parts in (content, as_file):
        body = ask([{"role": "user", "content": parts}], model="fake-whisper", stream=stream)
        reply = await http.post(URL, json=body)
        assert reply.status_code == 200, reply.text
        final = events(reply.text)[-1]["response"] if stream else reply.json()
        assert final["output"][0]["content"][0]["text"] == fake.script.transcript.strip()


async def test_a_long_answer_with_no_limit_is_completed_not_cut(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """No gateway default cuts it (it was 256 tokens, reported 'incomplete'); only the client's
    own max_output_tokens makes it incomplete."""
    fake.script.tokens = tuple(f" w{i}" for i in range(300))
    reply = (await http.post(URL, json=ask())).json()
    assert reply["status"] == "completed" and reply["incomplete_details"] is None
    assert reply["usage"]["output_tokens"] == 300
    cut = (await http.post(URL, json=ask(max_output_tokens=10))).json()
    assert cut["status"] == "incomplete"
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_input_tokens_are_the_engines_own_count_of_the_same_request(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """POST /v1/responses/input_tokens prepares the request as a create would (the continued
    conversation included) and answers the deployment's num_input_tokens; nothing is stored."""
    first = (await http.post(URL, json=ask("first question"))).json()
    fake.requests.clear()
    body = {"model": "fake-llava", "input": "and then?", "previous_response_id": first["id"],
            "instructions": "Be brief."}  # fmt: skip
    counted = await http.post(f"{URL}/input_tokens", json=body)
    assert counted.status_code == 200, counted.text
    (sent,) = fake.requests
    assert counted.json() == {
        "object": "response.input_tokens",
        "input_tokens": len(sent.scalar("text_input").encode()),  # the fake counts bytes
    }
    assert sent.scalar("max_tokens") == 1  # a prefill, not an answer
    prompt = sent.scalar("text_input")
    assert "Be brief." in prompt and "first question" in prompt and "and then?" in prompt
    created = (await http.post(URL, json=body)).json()
    assert created["usage"]["input_tokens"] == counted.json()["input_tokens"]
    missing = await http.post(f"{URL}/input_tokens", json={**body, "previous_response_id": "r"})
    assert missing.status_code == 400
    fake.requests.clear()
    uncounted = await http.post(f"{URL}/input_tokens", json={"model": "fake-minimal", "input": "x"})
    assert uncounted.status_code == 400 and uncounted.json()["error"]["param"] == "model"
    assert not fake.requests  # a deployment that cannot count is refused before any work
