"""A guide's shape measured before anything compiles it: one pass, on the event loop, cheap.

Each check names the ``[guides]`` limit a guide is over, so the 400 says what to change. The
limits keep the grammar engine in its comfort zone: llguidance recurses natively over a JSON
schema's nesting and ``$ref`` links (a chain of about 950 links overflows an 8 MiB stack) and
over a grammar's rules, and its Earley parser refuses a row of more than 2,000 items
(``ParserLimits::max_items_in_row``), which an object of more than 500 optional properties or an
``anyOf`` of more than 2,000 branches makes at its first token. A guide within the limits may
still be refused by the compiler (in the sandbox, ``compile.py``); one over them never reaches
it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Generator, Iterator
from typing import Any

from gateway.config import GuideSettings

BRANCH_KEYS = ("anyOf", "oneOf", "allOf", "enum", "prefixItems")
DEF_KEYS = ("$defs", "definitions")


def over_limit(kind: str, text: str, limits: GuideSettings) -> str | None:
    """Which limit the guide of ``kind`` ("json_schema", "regex", "ebnf_grammar") is over, said
    in a sentence; None when it is within all of them."""
    steps = _steps(kind, text, limits)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            verdict: str | None = done.value
            return verdict


async def over_limit_soon(kind: str, text: str, limits: GuideSettings) -> str | None:
    """``over_limit``, giving the event loop its turn every ``STEP`` nodes: a schema of
    ``max_bytes`` takes tens of milliseconds to walk, which no stream should wait for (and a
    thread would hold the GIL from the loop for longer)."""
    steps = _steps(kind, text, limits)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            verdict: str | None = done.value
            return verdict
        await asyncio.sleep(0)


STEP = 1000  # nodes walked between two turns of the event loop
Steps = Generator[None, None, "str | None"]


def _steps(kind: str, text: str, limits: GuideSettings) -> Steps:
    size = len(text.encode())
    if size > limits.max_bytes:
        return _over("max_bytes", f"it is {size} bytes", limits.max_bytes)
    if kind == "json_schema":
        return (yield from _schema(text, limits))
    if kind == "regex":
        if size > limits.max_regex_bytes:
            return _over("max_regex_bytes", f"it is {size} bytes", limits.max_regex_bytes)
        return (yield from _groups(text, limits, quotes=False))
    if kind == "ebnf_grammar":
        rules = text.count("::=")
        if rules > limits.max_rules:
            return _over("max_rules", f"it has {rules} rules", limits.max_rules)
        return (yield from _groups(text, limits, quotes=True))
    return None


def _over(limit: str, what: str, most: int) -> str:
    return f"{what}, over the limit [guides] {limit} = {most}"


def _schema(text: str, limits: GuideSettings) -> Steps:
    try:
        schema = json.loads(text)
    except RecursionError:
        return _over("max_depth", "it is nested too deep to read", limits.max_depth)
    except ValueError:
        return None  # the compiler says what is wrong with it, in its words
    refs: dict[str, list[tuple[int, str]]] = {}  # definition -> (its depth there, target)
    deepest: dict[str, int] = {}  # definition (or "" for the root) -> its own nesting
    nodes = 0
    for node, depth, owner in _walk(schema):
        nodes += 1
        if nodes % STEP == 0:
            yield
        if nodes > limits.max_nodes:
            return _over("max_nodes", f"it has more than {limits.max_nodes} subschemas",
                         limits.max_nodes)  # fmt: skip
        if depth > limits.max_depth:
            return _over("max_depth", f"it nests more than {limits.max_depth} deep",
                         limits.max_depth)  # fmt: skip
        deepest[owner] = max(deepest.get(owner, 0), depth)
        if not isinstance(node, dict):
            continue
        why = _node(node, limits)
        if why is not None:
            return why
        ref = node.get("$ref")
        if isinstance(ref, str):
            refs.setdefault(owner, []).append((depth, _definition(ref)))
    reach = yield from _reach(refs, deepest)
    if reach > limits.max_ref_depth:
        return _over("max_ref_depth", f"following its $ref links it goes {reach} deep",
                     limits.max_ref_depth)  # fmt: skip
    return None


def _node(node: dict[str, Any], limits: GuideSettings) -> str | None:
    properties = node.get("properties")
    if isinstance(properties, dict) and len(properties) > limits.max_properties:
        return _over("max_properties", f"an object has {len(properties)} properties",
                     limits.max_properties)  # fmt: skip
    for key in BRANCH_KEYS:
        branches = node.get(key)
        if isinstance(branches, list) and len(branches) > limits.max_branches:
            return _over("max_branches", f"a {key} has {len(branches)} entries",
                         limits.max_branches)  # fmt: skip
    return None


def _walk(schema: Any) -> Iterator[tuple[Any, int, str]]:
    """Every JSON value in the schema with its depth and the root definition it is in (""
    outside ``$defs``): depths count from that definition, where a ``$ref`` lands."""
    stack: list[tuple[Any, int, str]] = [(schema, 0, "")]
    while stack:
        node, depth, owner = stack.pop()
        yield node, depth, owner
        if isinstance(node, list):
            stack.extend((item, depth + 1, owner) for item in node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in DEF_KEYS and depth == 0 and isinstance(value, dict):
                    stack.extend((sub, 0, f"#/{key}/{name}") for name, sub in value.items())
                elif key not in ("enum", "const", "default", "examples"):  # data, not schema
                    stack.append((value, depth + 1, owner))


def _definition(ref: str) -> str:
    """A ``$ref``'s target as ``_walk`` names definitions (other pointers: as they are)."""
    parts = ref.split("/")
    return "/".join(parts[:3]) if len(parts) >= 3 and parts[1] in DEF_KEYS else ref


def _reach(
    refs: dict[str, list[tuple[int, str]]], deepest: dict[str, int]
) -> Generator[None, None, int]:
    """How deep the schema goes with its ``$ref`` links followed: along the deepest chain of
    definitions, each link's depth in its definition plus one, then the last one's nesting.
    A cycle (a recursive schema, which the compiler expands lazily) is counted once round."""
    done: dict[str, int] = {}
    visiting: set[str] = set()
    for count, start in enumerate(deepest):
        if count % STEP == STEP - 1:
            yield
        if start in done:
            continue
        visiting.add(start)
        stack = [(start, iter(refs.get(start, ())))]
        while stack:
            name, pending = stack[-1]
            step = next((t for _, t in pending if t in deepest and t not in done
                         and t not in visiting), None)  # fmt: skip
            if step is not None:
                visiting.add(step)
                stack.append((step, iter(refs.get(step, ()))))
                continue
            stack.pop()
            visiting.discard(name)
            links = (d + 1 + done.get(t, 0) for d, t in refs.get(name, ()))
            done[name] = max(deepest.get(name, 0), *links, 0)
    return done.get("", 0) if "" in done else max(done.values(), default=0)


# What ``_groups`` looks at: an escape, a character class, a quoted literal (grammars), a
# parenthesis or a bar; the text in between is skipped by the regex engine, not by Python.
_REGEX_TOKENS = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]?|[()|]", re.S)
_GRAMMAR_TOKENS = re.compile(r'\\.|\[(?:\\.|[^\]\\])*\]?|"(?:\\.|[^"\\])*"?|[()]', re.S)


def _groups(text: str, limits: GuideSettings, *, quotes: bool) -> Steps:
    """Group nesting and (in a regex) alternatives, skipping escapes, character classes and
    (in a grammar) quoted literals."""
    depth = bars = 0
    tokens = (_GRAMMAR_TOKENS if quotes else _REGEX_TOKENS).finditer(text)
    for count, match in enumerate(tokens):
        if count % STEP == STEP - 1:
            yield
        token = match.group()
        if token == "(":
            depth += 1
            if depth > limits.max_depth:
                return _over("max_depth", f"its groups nest more than {limits.max_depth} deep",
                             limits.max_depth)  # fmt: skip
        elif token == ")":
            depth = max(0, depth - 1)
        elif token == "|":  # a grammar's alternatives are bounded by its rules
            bars += 1
            if bars >= limits.max_branches:
                return _over("max_branches", f"it has more than {limits.max_branches} "
                             "alternatives", limits.max_branches)  # fmt: skip
    return None
