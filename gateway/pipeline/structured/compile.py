"""Compile a guide as the engine will, in a sandbox, before Triton sees it; remember verdicts.

TensorRT-LLM compiles guides inside the engine; a guide it cannot compile fails the request
there, after admission, and an unknown guide type is not even an error (it is dropped, and the
output is unconstrained). So the gateway compiles every guide first with llguidance (a
zero-dependency abi3 wheel; xgrammar would pull torch, transformers and triton into the gateway)
and answers 400 with the engine's own message.

Three steps, cheapest first:

1. the verdict cache (``gateway/sandbox/cache.py``), by a digest of (type, guide): a guide sent
   on every request is compiled once; the cache is bounded in bytes, its messages cut short;
2. the structural limits (``bounds.py``), one pass on the event loop (a large guide's in
   steps, the loop taking its turn between them): a guide over one is refused naming the
   limit, and never reaches the compiler;
3. ``compile_error`` in a sandboxed worker process (``gateway/sandbox/``): native code that
   overflows its stack or runs away ends that worker, never the gateway, and the request gets
   a 400 (the guide is the cause). The compile is the engine's, limits included: the JSON schema
   in xgrammar's strict mode (what TensorRT-LLM asks for, and the reference models' ``guided.py``
   mirrors), compact separators, and a matcher over a byte-level vocabulary with llguidance's
   default ``ParserLimits`` (``max_items_in_row`` 2,000, lexer fuel...) walked a few steps from
   its start, where a row too wide (the engine's "Current row has 39999 items; max is 2000") or
   a lexer out of fuel shows.

JSON schemas and regexes are llguidance's native inputs; an ``ebnf_grammar`` (xgrammar's GBNF
dialect) goes through llguidance's ``gbnf_to_lark`` converter, which covers the GBNF that
llama.cpp and xgrammar share.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gateway.config import GuideSettings
from gateway.families.calls import Guide
from gateway.pipeline.structured.bounds import over_limit, over_limit_soon
from gateway.sandbox import (
    SandboxCrashed,
    SandboxPool,
    SandboxTimeout,
    VerdictCache,
)
from gateway.sandbox.pool import SandboxJobFailed

INLINE_BYTES = 16 * 1024  # guides measured on the event loop (well under a millisecond)
PROBE_STEPS = 24  # matcher steps walked from the start: where the widest rows are
# The reference models' JSON options (server_repo/reference_kit/guided.py): compact JSON.
JSON_OPTIONS: Any = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Bytes a probe prefers when the grammar allows them: they open the nodes that branch most.
_OPENERS = b'{["'


async def guide_error(
    guide: Guide, limits: GuideSettings, pool: SandboxPool, cache: VerdictCache
) -> str | None:
    """Why ``guide`` cannot be used (a short sentence), or None when it compiles."""
    if guide.type == "json":
        return None  # any JSON: TensorRT-LLM's built-in grammar, nothing to compile
    key = hashlib.blake2b(f"{guide.type}\0{guide.text}".encode(), digest_size=16).digest()
    found, verdict = cache.get(key)
    if found:
        return verdict
    if len(guide.text) <= INLINE_BYTES:
        verdict = over_limit(guide.type, guide.text, limits)
    else:  # a walk of up to max_bytes takes tens of ms: in steps, the loop between them
        verdict = await over_limit_soon(guide.type, guide.text, limits)
    if verdict is None:
        verdict = await _compiled(guide, limits, pool)
    if verdict is not None:
        verdict = short(verdict, limits.max_message_chars)
    cache.put(key, verdict)
    return verdict


async def _compiled(guide: Guide, limits: GuideSettings, pool: SandboxPool) -> str | None:
    try:
        verdict: str | None = await pool.run(compile_error, guide.type, guide.text)
    except SandboxTimeout:
        return (f"compiling it took longer than {limits.compile_timeout_s:g} s, over the limit "
                "[guides] compile_timeout_s")  # fmt: skip
    except SandboxCrashed as crash:
        return f"it crashed the grammar compiler ({crash.how}); simplify it (fewer levels)"
    except SandboxJobFailed as failed:
        return str(failed)
    return verdict


def short(message: str, most: int) -> str:
    """The message's first line, at most ``most`` characters (a compiler quotes the guide)."""
    first = " ".join(message.split("\n<state>")[0].split())
    return first if len(first) <= most else first[: most - 25] + f" ... ({len(first)} chars)"


def compile_error(guide_type: str, text: str) -> str | None:
    """Compile as the engine does: None, or the compiler's message (runs in the sandbox)."""
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
