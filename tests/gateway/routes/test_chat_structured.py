"""Structured outputs through the routes: the guide Triton receives for each spelling (chat and
completions), and every refusal as a 400 naming its field."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.fakes.app import assert_openai_error, chat
from tests.fakes.triton import FakeTriton

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
JSON_SCHEMA = {
    "type": "json_schema",
    "json_schema": {"name": "A", "schema": SCHEMA, "strict": True},
}


def guide_sent(fake: FakeTriton) -> tuple[str | None, str | None]:
    received = fake.requests[-1]
    return received.scalar("guided_decoding_guide_type"), received.scalar("guided_decoding_guide")


@pytest.mark.parametrize(
    ("fields", "sent"),
    [
        ({"response_format": JSON_SCHEMA}, ("json_schema", json.dumps(SCHEMA))),
        # An object, as OpenAI means it (TensorRT-LLM's ``json`` admits an array too).
        ({"response_format": {"type": "json_object"}}, ("json_schema", '{"type": "object"}')),
        ({"structured_outputs": {"regex": "[0-9]+"}}, ("regex", "[0-9]+")),
        ({"structured_outputs": {"choice": ["yes", "no"]}}, ("regex", "(yes)|(no)")),
        ({"guided_grammar": 'root ::= "a"'}, ("ebnf_grammar", 'root ::= "a"')),
        ({"response_format": {"type": "text"}}, (None, None)),
    ],
)
@pytest.mark.parametrize("url", [CHAT, COMPLETIONS])
async def test_the_guide_reaches_triton(
    http: httpx.AsyncClient, fake: FakeTriton, url: str, fields: dict, sent: tuple
) -> None:
    body = chat(model="fake-guided", **fields)
    if url == COMPLETIONS:
        body = {"model": "fake-guided", "prompt": "Say", **fields}
    response = await http.post(url, json=body)
    assert response.status_code == 200, response.text
    assert guide_sent(fake) == sent


async def test_each_of_n_choices_carries_the_guide(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(
        CHAT, json=chat(model="fake-guided", n=3, response_format=JSON_SCHEMA)
    )
    assert response.status_code == 200 and len(fake.requests) == 3
    assert {guide_sent(fake)} == {("json_schema", json.dumps(SCHEMA))}
    assert all(r.scalar("guided_decoding_guide_type") == "json_schema" for r in fake.requests)


@pytest.mark.parametrize("url", [CHAT, COMPLETIONS])
async def test_a_model_without_the_guide_inputs_is_a_400_naming_them_and_the_flag(
    http: httpx.AsyncClient, fake: FakeTriton, url: str
) -> None:
    body = chat(model="fake-unguided", response_format=JSON_SCHEMA)
    if url == COMPLETIONS:
        body = {"model": "fake-unguided", "prompt": "Say", "response_format": JSON_SCHEMA}
    error = assert_openai_error(await http.post(url, json=body), 400, "unsupported_parameter")
    assert error["param"] == "response_format"
    assert "guided_decoding_guide_type" in error["message"]
    assert "guided_decoding_guide'" in error["message"]
    assert "mmgw trtllm-repo --guided-decoding" in error["message"]
    assert not fake.requests


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": {
            "type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}}}}},
         "response_format", "invalid_guide"),
        ({"guided_regex": "(unclosed"}, "guided_regex", "invalid_guide"),
        ({"structured_outputs": {"grammar": "root ::= missing"}}, "structured_outputs.grammar",
         "invalid_guide"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "bad name!"}}},
         "response_format.json_schema.name", "invalid_request"),
        ({"response_format": {"type": "structural_tag"}}, "response_format.type",
         "unsupported_parameter"),
        ({"response_format": {"type": "json_object"}, "guided_regex": "a"}, "guided_regex",
         "invalid_request"),
        ({"guided_whitespace_pattern": "\\s"}, "guided_whitespace_pattern",
         "unsupported_parameter"),
    ],
)  # fmt: skip
async def test_bad_constraints_are_400s_naming_the_field(
    http: httpx.AsyncClient, fake: FakeTriton, fields: dict, param: str, code: str
) -> None:
    response = await http.post(CHAT, json=chat(model="fake-guided", **fields))
    error = assert_openai_error(response, 400, code)
    assert error["param"] == param
    assert not fake.requests


async def test_an_uncompilable_schema_says_why(http: httpx.AsyncClient) -> None:
    bad = {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": "strng"}}}
    response = await http.post(CHAT, json=chat(model="fake-guided", response_format=bad))
    error = assert_openai_error(response, 400, "invalid_guide")
    assert "cannot be compiled" in error["message"] and "strng" in error["message"]
