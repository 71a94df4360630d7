"""Every spelling of a constraint becomes one of TensorRT-LLM's four guide types; conflicting
or malformed ones are 400s naming the field; guides are compiled once and remembered."""

from __future__ import annotations

import json
import re

import pytest

from gateway.errors import InvalidRequest
from gateway.families.calls import Guide
from gateway.guides.compile import compile_error
from gateway.location import rendered
from gateway.pipeline.structured.guides import JSON_OBJECT, literal_regex, requested_guide
from gateway.protocol.structured import ResponseFormat

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def fmt(**fields: object) -> ResponseFormat:
    return ResponseFormat.model_validate(fields)


@pytest.mark.parametrize(
    ("response_format", "extra", "guide", "param"),
    [
        (fmt(type="json_object"), {}, JSON_OBJECT, "response_format"),
        (
            fmt(type="json_schema", json_schema={"name": "x", "schema": SCHEMA, "strict": True}),
            {}, Guide("json_schema", json.dumps(SCHEMA)), "response_format",
        ),
        (fmt(type="json_schema", json_schema={"name": "x"}), {}, Guide("json"), "response_format"),
        (None, {"structured_outputs": {"json": SCHEMA}}, Guide("json_schema", json.dumps(SCHEMA)),
         "structured_outputs.json"),
        (None, {"structured_outputs": {"regex": r"\d+"}}, Guide("regex", r"\d+"),
         "structured_outputs.regex"),
        (None, {"structured_outputs": {"grammar": "root ::= [0-9]+"}},
         Guide("ebnf_grammar", "root ::= [0-9]+"), "structured_outputs.grammar"),
        (None, {"structured_outputs": {"json_object": True}}, JSON_OBJECT,
         "structured_outputs.json_object"),
        (None, {"guided_json": json.dumps(SCHEMA)}, Guide("json_schema", json.dumps(SCHEMA)),
         "guided_json"),
        (None, {"guided_regex": "[ab]+"}, Guide("regex", "[ab]+"), "guided_regex"),
        (None, {"guided_choice": ["yes", "no"]}, Guide("regex", "(yes)|(no)"), "guided_choice"),
        (None, {"guided_grammar": "root ::= \"x\""}, Guide("ebnf_grammar", 'root ::= "x"'),
         "guided_grammar"),
        (fmt(type="text"), {"guided_decoding_backend": "xgrammar"}, None, None),
    ],
)  # fmt: skip
def test_each_spelling_maps_to_one_guide(response_format, extra, guide, param) -> None:
    asked = requested_guide(response_format, extra)
    assert (asked.guide, rendered(asked.param)) == (guide, param) if asked else guide is None


@pytest.mark.parametrize(
    ("response_format", "extra", "param"),
    [
        (fmt(type="json_object"), {"guided_regex": "a"}, "guided_regex"),
        (None, {"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs"),
        (None, {"structured_outputs": {}}, "structured_outputs"),
        (None, {"structured_outputs": {"structural_tag": "{}"}},
         "structured_outputs.structural_tag"),
        (None, {"structured_outputs": {"regex": "a", "whatever": 1}},
         "structured_outputs.whatever"),
        (None, {"guided_choice": []}, "guided_choice"),
        (None, {"guided_choice": ["a", 1]}, "guided_choice"),
        (None, {"guided_regex": ""}, "guided_regex"),
        (None, {"guided_decoding_backend": "outlines"}, "guided_decoding_backend"),
        (fmt(type="structural_tag"), {}, "response_format.type"),
        (fmt(type="json_schema"), {}, "response_format.json_schema"),
    ],
)  # fmt: skip
def test_conflicting_or_malformed_constraints_are_refused(response_format, extra, param) -> None:
    with pytest.raises(InvalidRequest) as refused:
        requested_guide(response_format, extra)
    assert refused.value.param == param


def test_choices_become_a_regex_matching_exactly_them() -> None:
    choices = ["a.b", "x|y", "(1+2)*3", "plain text", "$5 [USD]", "back\\slash"]
    asked = requested_guide(None, {"guided_choice": choices})
    assert asked is not None and compile_error(asked.guide.type, asked.guide.text) is None
    pattern = re.compile(asked.guide.text)
    assert all(pattern.fullmatch(c) for c in choices)
    assert not pattern.fullmatch("aXb") and not pattern.fullmatch("x")
    assert literal_regex("a.b") == r"a\.b"


@pytest.mark.parametrize(
    ("guide", "why"),
    [
        (Guide("json_schema", '{"type": "nope"}'), "nope"),
        (Guide("json_schema", '{"$ref": "#/$defs/missing"}'), "missing"),
        (Guide("json_schema", "{not json"), ""),
        (Guide("regex", "[a-"), "unclosed"),
        (Guide("ebnf_grammar", "root ::= undefined"), "undefined"),
        (Guide("ebnf_grammar", "root ::= ("), ""),
    ],
)
def test_uncompilable_guides_say_why(guide: Guide, why: str) -> None:
    error = compile_error(guide.type, guide.text)
    assert error and why in error


@pytest.mark.parametrize(
    "guide",
    [
        Guide("json_schema", json.dumps(SCHEMA)),
        Guide("regex", r"\d{3}-[a-z]+"),
        Guide("ebnf_grammar", 'root ::= item ("," item)*\nitem ::= [0-9]+ | "x"'),
    ],
)
def test_good_guides_compile(guide: Guide) -> None:
    assert compile_error(guide.type, guide.text) is None
