"""Fuzzing of the guides themselves (issue 22 item 5): hypothesis generates JSON schemas (deep,
wide, recursive, with dangling and chained ``$ref``s), regexes and grammars (bombs among them)
and sends them in every spelling (``response_format``, a tool's ``parameters`` with a named or
``required`` choice, ``guided_*``, ``structured_outputs``) through the real app over the fake
Triton. No answer may be a 5xx, every refusal is one OpenAI error object, and the gateway is
serving afterwards. Deterministic (``derandomize``) and bounded in examples.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.app import chat
from tests.gateway.guides.test_bounds import chain, nested, wide
from tests.gateway.routes.test_fuzz import Fuzzed, assert_openai_error_body

FUZZ = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))  # fmt: skip
REFUSALS = {"invalid_guide", "invalid_request", "unsupported_parameter", "request_too_large"}
KEYS = st.text(alphabet="abcxyz_", min_size=1, max_size=6)


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    built = Fuzzed()
    yield built
    built.close()


def leaves() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.sampled_from([{"type": t} for t in ("string", "integer", "number", "boolean", "null")]),
        st.lists(st.integers() | KEYS, min_size=1, max_size=5).map(lambda v: {"enum": v}),
        st.builds(
            lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a+$", "[0-9]{3}", "("])
        ),
        KEYS.map(lambda k: {"$ref": f"#/$defs/{k}"}),  # dangling, mostly
        st.just({"type": "strng"}),
    )


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    random = st.recursive(
        leaves(),
        lambda inner: st.one_of(
            st.dictionaries(KEYS, inner, max_size=6).map(
                lambda p: {"type": "object", "properties": p, "required": list(p)[:1]}),
            inner.map(lambda i: {"type": "array", "items": i}),
            st.lists(inner, min_size=1, max_size=4).map(lambda b: {"anyOf": b}),
            st.tuples(KEYS, inner, inner).map(
                lambda t: {"$ref": f"#/$defs/{t[0]}", "$defs": {t[0]: t[1], "o": t[2]}}),
        ),
        max_leaves=40,
    )  # fmt: skip
    hostile = st.one_of(
        st.integers(1, 3000).map(lambda n: json.loads(chain(n))),
        st.integers(1, 120).map(lambda n: json.loads(nested(n))),
        st.integers(1, 3000).map(lambda n: json.loads(wide(n))),
        st.integers(1, 3000).map(lambda n: {"anyOf": [{"const": i} for i in range(n)]}),
    )
    return st.one_of(random, hostile)


def regexes() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(alphabet="ab()[]{}|*+?.\\^$0-9,-", min_size=1, max_size=80),
        st.tuples(st.integers(1, 2000), st.integers(1, 2000)).map(
            lambda t: f"(a{{{t[0]}}}){{{t[1]}}}"),
        st.integers(1, 500).map(lambda n: "(" * n + "a" + ")" * n),
        st.integers(1, 3000).map(lambda n: "|".join(f"w{i}" for i in range(n))),
    )  # fmt: skip


def grammars() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(1, 3000).map(lambda n: "\n".join(
            ["root ::= r0", *(f'r{i} ::= "a" r{i + 1}' for i in range(n)), f'r{n} ::= "b"'])),
        st.integers(1, 200).map(lambda n: "root ::= " + "(" * n + '"a"' + ")" * n),
        st.text(alphabet='root:=|"ab()[]*+? \n', min_size=1, max_size=80),
    )  # fmt: skip


def ask(fuzzed: Fuzzed, url: str, body: dict[str, Any]) -> None:
    response = fuzzed.loop.run(fuzzed.http.post(url, json=body))
    assert response.status_code < 500, response.text[:500]
    if response.status_code != 200:
        assert_openai_error_body(response)
        assert response.status_code == 400 and response.json()["error"]["code"] in REFUSALS
        assert len(response.content) < 4096  # messages are bounded, whatever the guide


def spellings(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    format_ = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    named = {"type": "function", "function": {"name": "f"}}
    return [
        ("/v1/chat/completions", chat(model="fake-guided", response_format=format_)),
        ("/v1/chat/completions", chat(model="fake-guided", tools=[tool], tool_choice=named)),
        ("/v1/chat/completions", chat(model="fake-guided", tools=[tool], tool_choice="required")),
        ("/v1/completions", {"model": "fake-guided", "prompt": "x", "guided_json": schema}),
        ("/v1/completions",
         {"model": "fake-guided", "prompt": "x", "structured_outputs": {"json": schema}}),
    ]  # fmt: skip


@FUZZ
@given(schema=schemas(), which=st.integers(0, 4))
def test_json_schemas_in_every_spelling(fuzzed: Fuzzed, schema: dict[str, Any], which: int) -> None:
    url, body = spellings(schema)[which]
    ask(fuzzed, url, body)


@settings(FUZZ, max_examples=40)
@given(regex=regexes(), choices=st.lists(st.text(max_size=20), min_size=1, max_size=30))
def test_regexes_and_choices(fuzzed: Fuzzed, regex: str, choices: list[str]) -> None:
    ask(fuzzed, "/v1/chat/completions", chat(model="fake-guided", guided_regex=regex))
    ask(
        fuzzed, "/v1/completions", {"model": "fake-guided", "prompt": "x", "guided_choice": choices}
    )


@settings(FUZZ, max_examples=25)
@given(grammar=grammars())
def test_grammars(fuzzed: Fuzzed, grammar: str) -> None:
    ask(fuzzed, "/v1/chat/completions", chat(model="fake-guided", guided_grammar=grammar))


def test_the_gateway_still_serves_after_the_fuzzing(fuzzed: Fuzzed) -> None:
    ask(fuzzed, "/v1/chat/completions", chat(model="fake-guided", guided_regex="[0-9]+"))
    reply = fuzzed.loop.run(fuzzed.http.post("/v1/chat/completions", json=chat()))
    assert reply.status_code == 200
