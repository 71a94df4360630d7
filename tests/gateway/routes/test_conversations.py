"""The Conversations API through the OpenAI SDK unchanged (in process, over the fake Triton):
the conversation and its items, paging, deletes, API-key scoping, refusals by field; and
``responses.create(conversation=...)`` reading the items as context and appending each turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tests.fakes.app import FakeGateway, assert_openai_error, data_url, http_client, png
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import API_KEY, OTHER_KEY, Gateways

URL = "/v1/conversations"


@pytest.fixture
async def keyed(gateways: Gateways, fake: FakeTriton) -> FakeGateway:
    return await gateways.get("keyed")


@pytest.fixture
async def http(keyed: FakeGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with http_client(keyed.app, headers=headers) as client:
        yield client


@pytest.fixture
def sdk(http: httpx.AsyncClient) -> AsyncOpenAI:
    return AsyncOpenAI(base_url="http://gateway/v1", api_key=API_KEY, http_client=http)


def said(text: str, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


async def test_a_conversation_and_its_items_through_the_sdk(sdk: AsyncOpenAI) -> None:
    made = await sdk.conversations.create(
        items=[said("Be brief.", "developer"), said("first"), said("second")],
        metadata={"topic": "birds"},
    )
    assert made.id.startswith("conv_") and made.metadata == {"topic": "birds"}
    assert (await sdk.conversations.retrieve(made.id)).created_at == made.created_at
    updated = await sdk.conversations.update(made.id, metadata={"topic": "fish"})
    assert updated.metadata == {"topic": "fish"}
    listed = [item async for item in sdk.conversations.items.list(made.id)]
    texts = [item.content[0].text for item in listed]  # type: ignore[union-attr]
    assert texts == ["second", "first", "Be brief."]  # newest first by default
    page = await sdk.conversations.items.list(made.id, order="asc", limit=2)
    assert [i.content[0].text for i in page.data] == ["Be brief.", "first"]  # type: ignore[union-attr]
    assert page.has_more
    added = await sdk.conversations.items.create(made.id, items=[said("third")])
    (third,) = added.data
    found = await sdk.conversations.items.retrieve(third.id, conversation_id=made.id)
    assert found.id == third.id
    after = await sdk.conversations.items.delete(third.id, conversation_id=made.id)
    assert after.id == made.id
    with pytest.raises(openai.NotFoundError):
        await sdk.conversations.items.retrieve(third.id, conversation_id=made.id)
    deleted = await sdk.conversations.delete(made.id)
    assert deleted.deleted and deleted.object == "conversation.deleted"
    with pytest.raises(openai.NotFoundError):
        await sdk.conversations.retrieve(made.id)


async def test_responses_read_and_extend_a_conversation(sdk: AsyncOpenAI, fake: FakeTriton) -> None:
    image = data_url(png(5))
    first_input = [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": image, "detail": "auto"},
    ]}]  # fmt: skip
    conversation = await sdk.conversations.create(items=[said("Remember: purple.")])
    first = await sdk.responses.create(
        model="fake-onevision",
        input=first_input,
        conversation=conversation.id,  # type: ignore[arg-type]
    )
    assert first.conversation is not None and first.conversation.id == conversation.id
    assert "Remember: purple." in fake.requests[-1].scalar("text_input")
    second = await sdk.responses.create(
        model="fake-onevision", input="And again?", conversation={"id": conversation.id}
    )
    prompt = fake.requests[-1].scalar("text_input")
    assert "Remember: purple." in prompt and "What is this?" in prompt
    assert first.output_text in prompt  # the first turn's answer is context now
    assert fake.requests[-1].scalar("prompt_table_extra_id") == fake.requests[-2].scalar(
        "prompt_table_extra_id"
    )  # the image keeps its content id: the KV cache hits
    items = [i async for i in sdk.conversations.items.list(conversation.id, order="asc")]
    kinds = [(i.type, getattr(i, "role", None)) for i in items]
    assert kinds == [("message", "user")] + [("message", "user"), ("message", "assistant")] * 2
    assert items[-1].id == second.output[0].id


async def test_what_cannot_be_served_is_refused_by_name(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    made = (await http.post(URL, json={"items": [said("hi")]})).json()
    body = {"model": "fake-llava", "input": "x", "conversation": made["id"],
            "previous_response_id": "resp_1"}  # fmt: skip
    error = assert_openai_error(await http.post("/v1/responses", json=body), 400)
    assert error["param"] == "conversation"
    missing = {"model": "fake-llava", "input": "x", "conversation": "conv_nope"}
    error = assert_openai_error(await http.post("/v1/responses", json=missing), 404)
    assert error["param"] == "conversation"
    assert not fake.requests  # refused before any generation
    refusals = [
        ({"items": [said("x")] * 21}, "items"),
        ({"items": [{"type": "message", "role": "wizard", "content": "x"}]}, "items[0]"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"title": "not a field"}, "title"),
    ]
    for refused, param in refusals:
        error = assert_openai_error(await http.post(URL, json=refused), 400)
        assert (error["param"] or "").startswith(param), error
    empty = await http.post(f"{URL}/{made['id']}/items", json={"items": []})
    assert assert_openai_error(empty, 400)["param"] == "items"


async def test_a_conversation_belongs_to_its_api_key(
    http: httpx.AsyncClient, keyed: FakeGateway
) -> None:
    made = (await http.post(URL, json={"items": [said("mine")]})).json()
    item = (await http.get(f"{URL}/{made['id']}/items")).json()["data"][0]
    theirs = {"Authorization": f"Bearer {OTHER_KEY}"}
    path = f"{URL}/{made['id']}"
    async with http_client(keyed.app, headers=theirs) as other:
        for method, url, body in [
            ("GET", path, None), ("POST", path, {"metadata": {}}), ("DELETE", path, None),
            ("GET", f"{path}/items", None), ("POST", f"{path}/items", {"items": [said("x")]}),
            ("GET", f"{path}/items/{item['id']}", None),
            ("DELETE", f"{path}/items/{item['id']}", None),
        ]:  # fmt: skip
            answer = await other.request(method, url, json=body)
            assert_openai_error(answer, 404, "not_found")
        asked = {"model": "fake-llava", "input": "x", "conversation": made["id"]}
        assert_openai_error(await other.post("/v1/responses", json=asked), 404)
    assert (await http.get(f"{path}/items")).json()["data"] == [item]  # untouched
