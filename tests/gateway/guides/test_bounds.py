"""The structural limits, measured before any compile: each names the limit a guide is over;
guides of ordinary shapes (recursive ones too) are within them."""

from __future__ import annotations

import json

import pytest

from gateway.config import GuideSettings
from gateway.guides.bounds import over_limit

LIMITS = GuideSettings()


def chain(links: int) -> str:
    """The campaign's schema: a ``$defs`` chain ``links`` deep."""
    defs = {f"d{i}": {"type": "object", "properties": {"n": {"$ref": f"#/$defs/d{i + 1}"}}}
            for i in range(links)}  # fmt: skip
    defs[f"d{links}"] = {"type": "string"}
    return json.dumps({"$ref": "#/$defs/d0", "$defs": defs})


def nested(levels: int) -> str:
    return '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels


def wide(properties: int) -> str:
    return json.dumps({"type": "object", "properties": {f"p{i}": {"type": "string"}
                                                         for i in range(properties)}})  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "text", "limit"),
    [
        ("json_schema", chain(2000), "max_ref_depth"),
        ("json_schema", nested(40), "max_depth"),
        ("json_schema", wide(10_000), "max_bytes"),
        ("json_schema", wide(600), "max_properties"),
        ("json_schema", json.dumps({"anyOf": [{"const": i} for i in range(1500)]}), "max_branches"),
        ("json_schema", json.dumps({"enum": list(range(1500))}), "max_branches"),
        ("regex", "a" * 20_000, "max_regex_bytes"),
        ("regex", "(" * 100 + ")" * 100, "max_depth"),
        ("regex", "|".join(str(i) for i in range(1500)), "max_branches"),
        ("ebnf_grammar", "\n".join(f'r{i} ::= "a" r{i + 1}' for i in range(5000)), "max_rules"),
        ("ebnf_grammar", "root ::= " + "(" * 80 + '"a"' + ")" * 80, "max_depth"),
    ],
)
def test_each_limit_is_named(kind: str, text: str, limit: str) -> None:
    why = over_limit(kind, text, LIMITS)
    assert why is not None and f"[guides] {limit} = " in why


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("json_schema", chain(60)),
        ("json_schema", nested(20)),
        ("json_schema", wide(500)),
        # A recursive schema (a tree): its cycle is counted once round.
        (
            "json_schema",
            json.dumps(
                {
                    "$ref": "#/$defs/node",
                    "$defs": {
                        "node": {
                            "type": "object",
                            "properties": {
                                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                            },
                        }
                    },
                }
            ),
        ),
        ("json_schema", "{not json"),  # the compiler words this one
        ("regex", r"[(|]{3}\(\|" + "(a|b)" * 10),  # classes and escapes are not groups
        ("ebnf_grammar", 'root ::= "(((((" item*\nitem ::= [0-9]+ | "|"'),
    ],
)
def test_ordinary_guides_are_within_the_limits(kind: str, text: str) -> None:
    assert over_limit(kind, text, LIMITS) is None


def test_a_limit_is_the_operators_to_raise() -> None:
    assert over_limit("json_schema", wide(600), GuideSettings(max_properties=1000)) is None
