"""Compile a guide with a real grammar engine before Triton sees it, and remember the verdict.

TensorRT-LLM compiles guides with xgrammar inside the engine; a guide it cannot compile fails
the request there, after admission, and an unknown guide type is not even an error (it is
dropped, and the output is unconstrained). So the gateway compiles every guide first with
llguidance (a zero-dependency abi3 wheel; xgrammar would pull torch, transformers and triton
into the gateway) and answers 400 with the engine's own message. JSON schemas and regexes are
llguidance's native inputs; an ``ebnf_grammar`` (xgrammar's GBNF dialect) is checked through
llguidance's ``gbnf_to_lark`` converter, which covers the GBNF that llama.cpp and xgrammar
share. Verdicts are cached by a digest of (type, guide), so a schema sent on every request is
compiled once.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from llguidance import LLMatcher
from llguidance.gbnf_to_lark import gbnf_to_lark

from gateway.families.calls import Guide

CACHE_SIZE = 1024  # distinct guides remembered (each entry: a digest and a short message)


class GuideCache:
    """(type, guide) digest -> None (compiles) or the engine's error, least recently used
    first out."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self.entries: OrderedDict[bytes, str | None] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def error(self, guide: Guide) -> str | None:
        """Why ``guide`` does not compile, or None when it does."""
        key = hashlib.blake2b(f"{guide.type}\0{guide.text}".encode(), digest_size=16).digest()
        if key in self.entries:
            self.hits += 1
            self.entries.move_to_end(key)
            return self.entries[key]
        self.misses += 1
        verdict = compile_error(guide)
        self.entries[key] = verdict
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return verdict


def compile_error(guide: Guide) -> str | None:
    """Compile ``guide`` with llguidance: None, or the engine's message."""
    try:
        if guide.type == "json":
            return None  # any JSON: TensorRT-LLM's built-in grammar, nothing to compile
        if guide.type == "json_schema":
            grammar = LLMatcher.grammar_from_json_schema(guide.text)
        elif guide.type == "regex":
            grammar = LLMatcher.grammar_from_regex(guide.text)
        else:
            grammar = LLMatcher.grammar_from_lark(gbnf_to_lark(guide.text))
        return LLMatcher.validate_grammar(grammar) or None
    except Exception as exc:  # the converter and the bindings raise plain exceptions
        return str(exc) or type(exc).__name__


GUIDES = GuideCache()  # one per process: a verdict depends on the guide alone
