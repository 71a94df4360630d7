"""The engine's compile of one guide, as a sandbox worker runs it (``compile.py`` sends it
there): llguidance, and nothing of the gateway, so a worker starts in a fraction of a second
and maps little (it imports llguidance and this module only).

The compile is the engine's, limits included: a JSON schema in xgrammar's strict mode (what
TensorRT-LLM asks ``CompileJSONSchema`` for, and the reference models' ``guided.py`` mirrors),
compact separators, then a matcher over a byte-level vocabulary with llguidance's default
``ParserLimits`` (``max_items_in_row`` 2,000, lexer fuel...), walked a few steps from its
start, where a row too wide ("Current row has 39999 items; max is 2000") or a lexer out of
fuel shows.
"""

from __future__ import annotations

import json
from typing import Any

MAX_MESSAGE_CHARS = 4000  # of a compiler's message sent back (the gateway cuts it further)
PROBE_STEPS = 24  # matcher steps walked from the start: where the widest rows are
# The reference models' JSON options (server_repo/reference_kit/guided.py): compact JSON.
JSON_OPTIONS: Any = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Bytes a probe prefers when the grammar allows them: they open the nodes that branch most.
_OPENERS = b'{["'


def compile_error(guide_type: str, text: str) -> str | None:
    """Compile as the engine does: None, or the compiler's message, cut short here (it quotes
    the guide, sometimes several times: a 1 MB regex made a 4 MB message), so no more than a
    few KB travel back (runs in the sandbox)."""
    message = _compile(guide_type, text)
    if message is None:
        return None
    return message.split("\n<state>")[0][:MAX_MESSAGE_CHARS]


def _compile(guide_type: str, text: str) -> str | None:
    from llguidance import LLMatcher

    try:
        grammar = _grammar(guide_type, text)
        error = LLMatcher.validate_grammar(grammar)
        if error:
            return error
        return _probe(LLMatcher(_tokenizer(), grammar, log_level=0))
    except Exception as exc:  # the converter and the bindings raise plain exceptions
        return str(exc) or type(exc).__name__


def _grammar(guide_type: str, text: str) -> str:
    from llguidance import LLMatcher
    from llguidance.gbnf_to_lark import gbnf_to_lark

    if guide_type == "json_schema":
        schema = strict_schema(json.loads(text))
        return LLMatcher.grammar_from_json_schema(json.dumps(schema), JSON_OPTIONS)
    if guide_type == "regex":
        return LLMatcher.grammar_from_regex(text)
    return LLMatcher.grammar_from_lark(gbnf_to_lark(text))


def _probe(matcher: Any) -> str | None:
    """Walk the matcher from its start, preferring bytes that open objects, arrays and strings
    (where rows are widest); the first error is the engine's too."""
    for _ in range(PROBE_STEPS):
        mask = matcher.compute_bitmask()
        if matcher.is_error():
            break
        allowed = [b for b in range(256) if mask[b // 8] >> (b % 8) & 1]
        if not allowed:
            break
        choice = next((b for b in _OPENERS if b in allowed), allowed[0])
        matcher.consume_token(choice)
        if matcher.is_error():
            break
    return matcher.get_error() or None if matcher.is_error() else None


_TOKENIZER: Any = None


def _tokenizer() -> Any:
    """A byte-level vocabulary (256 bytes and an end token): masks are cheap, and the parser
    limits act on grammar rows and lexer states, which no vocabulary changes."""
    global _TOKENIZER
    if _TOKENIZER is None:
        from llguidance import LLTokenizer, TokenizerWrapper

        _TOKENIZER = LLTokenizer(TokenizerWrapper(_ByteTokens()))
    return _TOKENIZER


class _ByteTokens:
    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = (256,)

    def __call__(self, text: bytes) -> list[int]:
        return list(text)


def strict_schema(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` wherever an object schema leaves it out:
    xgrammar's ``strict_mode`` (on in ``CompileJSONSchema``, which TensorRT-LLM calls) reads a
    missing ``additionalProperties`` as false; llguidance follows the JSON Schema default."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        elif key in ("enum", "const", "default", "examples"):
            out[key] = value  # data, not schemas
        else:
            out[key] = strict_schema(value)
    if "properties" in out or out.get("type") == "object":
        out.setdefault("additionalProperties", False)
    return out
