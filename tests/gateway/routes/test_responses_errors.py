"""/v1/responses refusals (each names its field), the stored responses' routes (GET, DELETE,
input_items and its paging), scoping by API key, and the stored-size cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError

from tests.fakes.app import assert_openai_error, data_url, http_client, png, start_gateway
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import API_KEY, OTHER_KEY, Gateways
from tests.gateway.routes.test_responses import URL, ask, image_input

PDF = "data:application/pdf;base64,JVBERi0xLjQK"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"background": True, "store": False}, "background"),
        ({"conversation": "conv_1", "previous_response_id": "resp_1"}, "conversation"),
        ({"truncation": "auto"}, "truncation"),
        # fake-llava has no reasoning_parser: an effort is refused, and summaries always are.
        ({"reasoning": {"effort": "high"}}, "reasoning.effort"),
        ({"reasoning": {"summary": "auto"}}, "reasoning.summary"),
        ({"reasoning": {"effort": "enormous"}}, "reasoning.effort"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"max_tool_calls": 3}, "max_tool_calls"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"text": {"verbosity": "low"}}, "text.verbosity"),
        ({"include": ["reasoning.encrypted_content"]}, "include[0]"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tools": [{"type": "file_search", "vector_store_ids": []}]}, "tools[0].type"),
        # Function tools and structured outputs are chat's, refused as chat refuses them: a
        # model without the guide inputs, a family without a tool-call format.
        ({"model": "fake-unguided", "text": {"format": {"type": "json_object"}}}, "text.format"),
        ({"tools": [{"type": "function", "name": "f"}], "model": "fake-blip2"}, "tools"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"max_output_tokens": 10**6}, "max_output_tokens"),
        # Chat's spellings, and chat's fields chat itself refuses (named as chat names them).
        ({"max_tokens": 5}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"n": 2}, "n"),
        ({"use_beam_search": True}, "use_beam_search"),
        ({"top_k": "many"}, "top_k"),
        # OpenAI generates nothing for these; generating anyway would answer another request.
        ({"prompt_cache_options": {"prewarm": True}}, "prompt_cache_options.prewarm"),
        ({"generate": False}, "generate"),
        ({"prompt_cache_options": {"mode": "sometimes"}}, "prompt_cache_options.mode"),
    ],
)
async def test_what_cannot_be_honoured_is_refused_by_name(
    http: httpx.AsyncClient, fake: FakeTriton, fields: dict[str, Any], param: str
) -> None:
    error = assert_openai_error(await http.post(URL, json=ask(**fields)), 400)
    assert error["param"] == param, error
    assert not fake.requests


@pytest.mark.parametrize(
    ("item", "param", "code"),
    [
        ({"type": "reasoning", "summary": "no"}, "input[1].summary", None),
        ({"type": "item_reference", "id": "msg_1"}, "input[1].type", "unsupported_parameter"),
        ({"type": "no_such_item"}, "input[1].type", "invalid_value"),
        ({"role": "tool", "content": "x"}, "input[1].role", None),
        ({"role": "user", "content": [{"type": "input_image", "file_id": "f"}]},
         "input[1].content[0].file_id", "unsupported_parameter"),
        ({"role": "user", "content": [{"type": "input_file", "file_data": PDF}]},
         "input[1].content[0]", "invalid_document"),
        ({"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]},
         "input[1].content[0].file_id", "unsupported_parameter"),
        ({"role": "assistant", "content": [{"type": "input_image", "image_url": "data:,"}]},
         "input[1].content[0]", None),
        ({"role": "user", "content": [{"type": "input_video"}]}, "input[1].content[0]", None),
    ],
)  # fmt: skip
async def test_input_items_that_cannot_be_served_are_named(
    http: httpx.AsyncClient, item: dict[str, Any], param: str, code: str | None
) -> None:
    body = ask([{"role": "user", "content": "Hi"}, item])
    error = assert_openai_error(await http.post(URL, json=body), 400, code)
    assert error["param"] == param, error


async def test_a_chat_refusal_names_the_responses_field(http: httpx.AsyncClient) -> None:
    # fake-blip2 needs an image: "messages" is this request's "input".
    error = assert_openai_error(await http.post(URL, json=ask("Hi", model="fake-blip2")), 400)
    assert error["param"] == "input" and error["code"] == "image_required", error
    # It takes one image: the second is named where this request put it.
    urls = image_input(data_url(png(1))) + image_input(data_url(png(2)))
    error = assert_openai_error(await http.post(URL, json=ask(urls, model="fake-blip2")), 400)
    assert error["param"] == "input[1].content[1]", error
    # A part LLaVA cannot take, named where this request put it (after the instructions).
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    items = [{"role": "user", "content": "Hi"}, {"role": "user", "content": [audio]}]
    body = ask(items, instructions="Be brief.")
    error = assert_openai_error(await http.post(URL, json=body), 400)
    assert error["param"] == "input[1].content[0]", error
    assert "messages" not in error["message"], error


async def test_an_unknown_model_and_an_empty_request_are_refused(http: httpx.AsyncClient) -> None:
    assert_openai_error(await http.post(URL, json=ask(model="nope")), 404, "model_not_found")
    error = assert_openai_error(await http.post(URL, json={"model": "fake-llava"}), 400)
    assert error["param"] == "input"
    error = assert_openai_error(await http.post(URL, json=ask(stream="yes")), 400)
    assert error["param"] == "stream"


async def test_an_unknown_previous_response_is_refused(http: httpx.AsyncClient) -> None:
    body = ask(previous_response_id="resp_missing")
    error = assert_openai_error(await http.post(URL, json=body), 400, "previous_response_not_found")
    assert error["param"] == "previous_response_id"


async def test_store_false_keeps_nothing(http: httpx.AsyncClient) -> None:
    reply = (await http.post(URL, json=ask(store=False))).json()
    assert reply["store"] is False
    assert_openai_error(await http.get(f"{URL}/{reply['id']}"), 404, "not_found")
    body = ask(previous_response_id=reply["id"])
    assert_openai_error(await http.post(URL, json=body), 400, "previous_response_not_found")


async def test_get_and_delete_a_stored_response(http: httpx.AsyncClient) -> None:
    created = (await http.post(URL, json=ask())).json()
    path = f"{URL}/{created['id']}"
    assert (await http.get(path)).json() == created
    deleted = await http.delete(path)
    assert deleted.json() == {"id": created["id"], "object": "response", "deleted": True}
    assert_openai_error(await http.get(path), 404, "not_found")
    assert_openai_error(await http.delete(path), 404, "not_found")
    assert_openai_error(await http.get(f"{path}/input_items"), 404, "not_found")


async def test_input_items_are_listed_and_paged(http: httpx.AsyncClient) -> None:
    items = [{"role": "user", "content": f"item {i}"} for i in range(5)]
    created = (await http.post(URL, json=ask(items))).json()
    path = f"{URL}/{created['id']}/input_items"
    listed = (await http.get(path)).json()
    assert listed["object"] == "list" and not listed["has_more"]
    texts = [item["content"][0]["text"] for item in listed["data"]]
    assert texts == [f"item {i}" for i in reversed(range(5))]  # newest first by default
    page = (await http.get(path, params={"order": "asc", "limit": 2})).json()
    assert [i["content"][0]["text"] for i in page["data"]] == ["item 0", "item 1"]
    assert page["has_more"] and page["last_id"] == page["data"][-1]["id"]
    rest = (await http.get(path, params={"order": "asc", "after": page["last_id"]})).json()
    assert [i["content"][0]["text"] for i in rest["data"]] == ["item 2", "item 3", "item 4"]
    assert not rest["has_more"]
    for bad in ({"limit": 0}, {"limit": 101}, {"order": "up"}, {"after": "msg_nope"}):
        assert_openai_error(await http.get(path, params=bad), 400)


async def test_a_stored_image_is_listed_as_sent(http: httpx.AsyncClient) -> None:
    url = data_url(png(5))
    created = (await http.post(URL, json=ask(image_input(url), model="fake-onevision"))).json()
    listed = (await http.get(f"{URL}/{created['id']}/input_items")).json()
    (message,) = listed["data"]
    assert message["content"][1] == {"type": "input_image", "image_url": url, "detail": "high"}


async def test_stored_responses_belong_to_their_api_key(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("keyed")
    mine = {"Authorization": f"Bearer {API_KEY}"}
    theirs = {"Authorization": f"Bearer {OTHER_KEY}"}
    async with http_client(gateway.app) as http:
        created = (await http.post(URL, json=ask(), headers=mine)).json()
        path = f"{URL}/{created['id']}"
        assert_openai_error(await http.get(path, headers=theirs), 404, "not_found")
        assert_openai_error(await http.delete(path, headers=theirs), 404, "not_found")
        follow = ask(previous_response_id=created["id"])
        assert_openai_error(await http.post(URL, json=follow, headers=theirs), 400)
        assert (await http.get(path, headers=mine)).status_code == 200
        assert (await http.post(URL, json=follow, headers=mine)).status_code == 200


async def test_a_response_too_large_to_store_is_refused_before_generation(
    gateways: Gateways, fake: FakeTriton
) -> None:
    gateway = await gateways.get("keyed")  # max_stored_bytes: 64 KiB
    headers = {"Authorization": f"Bearer {API_KEY}"}
    big = ask("x" * 70_000)
    async with http_client(gateway.app) as http:
        error = assert_openai_error(await http.post(URL, json=big, headers=headers), 400)
        assert error["param"] == "store" and error["code"] == "request_too_large"
        assert not fake.requests
        unstored = await http.post(URL, json={**big, "store": False}, headers=headers)
        assert unstored.status_code == 200


async def test_stored_responses_survive_a_restart(fake: FakeTriton, tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    first = await start_gateway(fake, responses={"store_path": path})
    async with http_client(first.app) as http:
        created = (await http.post(URL, json=ask("Remember me."))).json()
    await first.aclose()
    second = await start_gateway(fake, responses={"store_path": path})
    try:
        async with http_client(second.app) as http:
            assert (await http.get(f"{URL}/{created['id']}")).json() == created
            follow = ask("Again?", previous_response_id=created["id"])
            assert (await http.post(URL, json=follow)).status_code == 200
    finally:
        await second.aclose()
    assert "Remember me." in fake.requests[-1].scalar("text_input")


async def test_input_items_of_a_continuation_list_the_whole_conversation(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    first = (await http.post(URL, json=ask("first question"))).json()
    second = (await http.post(URL, json=ask("second", previous_response_id=first["id"]))).json()
    listed = (await http.get(f"{URL}/{second['id']}/input_items", params={"order": "asc"})).json()
    kinds = [(item["type"], item["role"]) for item in listed["data"]]
    assert kinds == [("message", "user"), ("message", "assistant"), ("message", "user")]
    assert listed["data"][1] == first["output"][0]  # the earlier answer, as it was returned
    assert listed["data"][2]["content"] == [{"type": "input_text", "text": "second"}]
    # A conversation whose earlier response is deleted can no longer be continued.
    await http.delete(f"{URL}/{first['id']}")
    follow = ask("third", previous_response_id=second["id"])
    assert_openai_error(await http.post(URL, json=follow), 400, "previous_response_not_found")
    listed = (await http.get(f"{URL}/{second['id']}/input_items")).json()
    assert len(listed["data"]) == 1  # what is still stored: its own input


async def test_a_prewarm_from_the_openai_sdk_is_refused_and_generates_nothing(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    client = AsyncOpenAI(base_url="http://gateway/v1", api_key="unused", http_client=http)
    with pytest.raises(BadRequestError) as refused:
        await client.responses.create(
            model="fake-llava", input="Hello?", prompt_cache_options={"prewarm": True}
        )
    assert refused.value.param == "prompt_cache_options.prewarm"
    assert refused.value.code == "unsupported_parameter"
    assert not fake.requests
    # The other cache options change nothing here, and are accepted.
    answered = await client.responses.create(
        model="fake-llava",
        input="Hello?",
        prompt_cache_options={"prewarm": False, "mode": "implicit", "ttl": "30m"},
        store=False,
    )
    assert answered.status == "completed" and fake.requests


async def test_a_long_id_is_not_echoed_whole(http: httpx.AsyncClient) -> None:
    """Issue 22 item 8: a 5,000-character id came back whole in the 404."""
    long_id = "resp_" + "x" * 5000
    for reply in (
        await http.get(f"{URL}/{long_id}"),
        await http.delete(f"{URL}/{long_id}"),
        await http.get(f"{URL}/{long_id}/input_items"),
    ):
        error = assert_openai_error(reply, 404, "not_found")
        assert len(reply.content) < 1024 and "(5005 characters)" in error["message"]
    reply = await http.post(URL, json=ask(previous_response_id=long_id))
    assert_openai_error(reply, 400)  # over the field's length (256), not echoed either
    assert len(reply.content) < 1024
