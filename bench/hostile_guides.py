"""200 different hostile guides, as the issue 22 campaign sent them: deep, wide, recursive,
regex and grammar bombs, in every spelling a request may carry a guide in. Each is
``(label, path, body)``; ``hostile_guides()`` lists them in the order ``bench hostile`` sends
them (the kinds interleaved, so no stretch of one kind runs alone)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

MODEL = "guided"
Request = tuple[str, str, dict[str, Any]]


def chain(links: int) -> dict[str, Any]:
    """The campaign's crash: a ``$defs`` chain ``links`` deep (2,000: 123 KB)."""
    defs = {f"d{i}": {"type": "object", "properties": {"n": {"$ref": f"#/$defs/d{i + 1}"}}}
            for i in range(links)}  # fmt: skip
    defs[f"d{links}"] = {"type": "string"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def wide(properties: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "string"}
                                             for i in range(properties)}}  # fmt: skip


def recursive(branches: int) -> dict[str, Any]:
    """A tree whose every node may be any of ``branches`` wide shapes, recursively."""
    node = {"$ref": "#/$defs/node"}
    shapes = [{"type": "object", "properties": {f"k{b}_{i}": node for i in range(60)}}
              for b in range(branches)]  # fmt: skip
    return {"$ref": "#/$defs/node", "$defs": {"node": {"anyOf": shapes}}}


def rows(objects: int) -> dict[str, Any]:
    """Each object fine alone; together wider than the engine's 2,000-item row."""
    return {"anyOf": [wide(300) for _ in range(objects)]}


def grammar_chain(rules: int) -> str:
    body = (f'r{i} ::= "a" r{i + 1}' for i in range(rules))
    return "\n".join(["root ::= r0", *body, f'r{rules} ::= "b"'])


def grammar_nest(levels: int) -> str:
    return "root ::= " + '("a" ' * levels + '"b"' + ")" * levels


def _schema_requests(schema: dict[str, Any], tag: str) -> Iterator[Request]:
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    named = {"type": "function", "function": {"name": "f"}}
    format_ = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "go"}]}
    yield f"{tag} response_format", "/v1/chat/completions", chat | {"response_format": format_}
    yield f"{tag} tool", "/v1/chat/completions", chat | {"tools": [tool], "tool_choice": named}
    yield f"{tag} guided_json", "/v1/completions", {"model": MODEL, "prompt": "go",
                                                   "guided_json": schema}  # fmt: skip


def _guided(field: str, value: Any, tag: str) -> Request:
    return tag, "/v1/completions", {"model": MODEL, "prompt": "go", field: value}


def _kinds() -> list[list[Request]]:
    schema_kinds: list[tuple[str, Callable[[int], dict[str, Any]], list[int]]] = [
        ("$defs chain", chain, [1000, 1500, 2000, 2500, 3000, 4000, 5000]),
        ("nested", nested, [40, 60, 80, 90, 100]),
        ("wide", wide, [600, 1000, 2000, 5000, 10000]),
        ("recursive", recursive, [2, 4, 8, 16, 30]),
        ("rows", rows, [5, 6, 7, 8, 10]),
    ]
    kinds = []
    for name, make, sizes in schema_kinds:
        kinds.append([r for n in sizes for r in _schema_requests(make(n), f"{name} {n}")])
    regexes = [f"(a{{{n}}}){{{n}}}" for n in (200, 500, 1000, 2000, 5000)]
    regexes += ["(" * n + "a" + ")" * n for n in (100, 500, 1000, 5000)]
    regexes += ["(" * n for n in (10_000, 100_000, 1_000_000)]  # invalid, and huge
    regexes += ["|".join(f"w{i}" for i in range(n)) for n in (2000, 5000, 20000)]
    regexes += [rf"(\p{{L}}{{10,20}}){{{n}}}" for n in (50, 100, 200, 400)]
    regexes += [r"(x+x+)+y" * n for n in (100, 400, 1000)]
    kinds.append([_guided("guided_regex", r, f"regex {len(r)}B") for r in regexes])
    grammars = [grammar_chain(n) for n in (600, 1000, 2000, 3000, 5000, 8000)]
    grammars += [grammar_nest(n) for n in (80, 200, 500, 1000, 3000)]
    grammars += ["root ::= " + " | ".join(f'"w{i}"' for i in range(n)) for n in (5000, 20000)]
    grammars += ["root ::= x\n" * n for n in (600, 2000)]
    kinds.append([_guided("guided_grammar", g, f"grammar {len(g)}B") for g in grammars])
    choices = [[f"c{i}" for i in range(n)] for n in (2000, 5000, 20000, 50000)]
    choices += [["(" * n] for n in (10_000, 100_000)]
    kinds.append([_guided("guided_choice", c, f"choice x{len(c)}") for c in choices])
    outputs = [{"json": chain(n)} for n in (1200, 2200, 3300)] + [
        {"regex": "(" * n} for n in (3000, 30000)] + [{"grammar": grammar_chain(n)}
                                                      for n in (700, 7000)]  # fmt: skip
    kinds.append([_guided("structured_outputs", o, f"structured_outputs {i}")
                  for i, o in enumerate(outputs)])  # fmt: skip
    return kinds


def hostile_guides(count: int = 200) -> list[Request]:
    """``count`` different hostile requests, the kinds taken in turn (then again, varied)."""
    kinds = _kinds()
    interleaved = [r for group in itertools.zip_longest(*kinds) for r in group if r is not None]
    out: list[Request] = []
    for round_ in itertools.count():
        for label, path, body in interleaved:
            if len(out) == count:
                return out
            if round_:  # a second pass: the same shapes, made different by a field name
                body = json.loads(json.dumps(body).replace('"go"', f'"go {round_}"'))
                body = _renamed(body, round_)
            out.append((f"{label}" + (f" #{round_ + 1}" if round_ else ""), path, body))
    return out


def _renamed(body: dict[str, Any], round_: int) -> dict[str, Any]:
    """The guide changed (not only the prompt), so its verdict is not a cache hit."""
    body = dict(body)
    for field, value in body.items():
        if field == "guided_regex":
            body[field] = f"{value}z{{{round_}}}"
        elif field == "guided_grammar":
            body[field] = f'{value}\nextra{round_} ::= "z"'
        elif field == "guided_choice":
            body[field] = [*value, f"extra {round_}"]
        elif field == "structured_outputs" and "grammar" in value:
            body[field] = {"grammar": f'{value["grammar"]}\nextra{round_} ::= "z"'}
    text = json.dumps(body)
    text = text.replace('"p0"', f'"q{round_}"').replace('"d0"', f'"e{round_}"')
    text = text.replace('{"a": ', f'{{"a{round_}": ').replace('"(((', f'"z{round_}(((')
    text = text.replace('$defs/node"', f'$defs/node{round_}"').replace(
        '"node":', f'"node{round_}":'
    )
    return json.loads(text)
