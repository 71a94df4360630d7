"""Guided decoding as TensorRT-LLM does it, on CPU with llguidance: a token mask per step.

TensorRT-LLM's ``tensorrt_llm`` model takes ``guided_decoding_guide_type`` (``json``,
``json_schema``, ``regex``, ``ebnf_grammar``) and ``guided_decoding_guide``; its
``GuidedDecoder`` (``cpp/tensorrt_llm/batch_manager/guidedDecoder.cpp``) compiles the guide
with xgrammar when the request's context starts, fills a token bitmask from the grammar
matcher before every step, applies it to that step's logits (``invokeLogitsBitmask``: a token
the grammar forbids gets -inf), and feeds the matcher the token the decoder chose. Once the
grammar is complete only the stop token (the tokenizer's EOS) is allowed, so generation ends
at ``end_id``. The reference models do the same with llguidance, the engine chosen here because
it is one wheel with no dependencies, where xgrammar (0.2.8) requires ``torch``,
``transformers``, ``triton`` (Linux x86-64), ``apache-tvm-ffi`` and ``pydantic``;
``docs/triton-contract.md`` lists where the two differ:

- ``json`` is xgrammar's built-in JSON grammar, whose root is an object or an array: here the
  schema ``{"type": ["object", "array"]}`` (the guide itself is ignored, as there).
- ``json_schema`` is compiled in xgrammar's ``strict_mode`` (on in the ``CompileJSONSchema``
  defaults TensorRT-LLM uses): objects take no properties beyond those named, unless the
  schema says otherwise (``additionalProperties``); llguidance's own default would allow them.
- JSON (``json`` and ``json_schema``) is written compact, with no whitespace between tokens
  (``,`` and ``:`` as separators), where xgrammar's default ``any_whitespace`` allows any run
  of it: a random tiny model, with no reason to stop, loops in whitespace until ``max_tokens``.
  What the reference writes is one of the texts TensorRT-LLM allows, and parses the same.
- ``regex`` is llguidance's regex (Rust ``regex`` syntax), xgrammar's is ECMAScript-like.
- ``ebnf_grammar`` is GBNF (``root ::= ...``, the dialect xgrammar reads), converted with
  llguidance's ``gbnf_to_lark``; xgrammar extensions beyond llama.cpp's GBNF (lookahead
  assertions ``(= ...)``) are refused as uncompilable.

A guide that does not compile is ``InvalidRequest`` (the Triton adapter answers INVALID_ARG).
Compiled grammars are kept per engine, keyed by (type, guide): a request copies the cached
matcher, so a repeated schema costs no compile.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import llguidance
import llguidance.hf
import torch
from llguidance.gbnf_to_lark import gbnf_to_lark
from transformers import PreTrainedTokenizerBase

from server_repo.reference_kit.request import InvalidRequest

DEFAULT_MAX_GRAMMARS = 128
# xgrammar's built-in JSON grammar (``Grammar::BuiltinJSONGrammar``): an object or an array.
ANY_JSON_SCHEMA = '{"type": ["object", "array"]}'
# Compact JSON: see the module docstring for why not xgrammar's any_whitespace.
JSON_OPTIONS: Any = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
# Schema keywords whose value maps names to subschemas (not itself a schema).
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def strict_schema(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` wherever an object schema leaves it out.

    xgrammar's ``strict_mode`` (on by default in ``CompileJSONSchema``, which TensorRT-LLM
    calls) treats a missing ``additionalProperties`` as false; the JSON Schema default, which
    llguidance follows, is true.
    """
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


def grammar_text(guide_type: str, guide: str | None) -> str:
    """The llguidance grammar for one TensorRT-LLM guide; ``InvalidRequest`` if unreadable."""
    if guide_type == "json":
        return llguidance.LLMatcher.grammar_from_json_schema(ANY_JSON_SCHEMA, JSON_OPTIONS)
    if guide is None:
        # GuidedDecodingParams' own check (tensorrt_llm/executor/guidedDecodingParams.cpp).
        raise InvalidRequest("The guide string must be provided unless using GuideType::kJSON.")
    if guide_type == "json_schema":
        try:
            schema = json.loads(guide)
        except ValueError as exc:
            raise InvalidRequest(f"guided_decoding_guide is not valid JSON: {exc}") from exc
        if not isinstance(schema, dict | bool):
            raise InvalidRequest("guided_decoding_guide must be a JSON schema object")
        strict = json.dumps(strict_schema(schema))
        return llguidance.LLMatcher.grammar_from_json_schema(strict, JSON_OPTIONS)
    if guide_type == "regex":
        return llguidance.LLMatcher.grammar_from_regex(guide)
    if guide_type == "ebnf_grammar":
        try:
            return llguidance.LLMatcher.grammar_from_lark(gbnf_to_lark(guide))
        except Exception as exc:  # the converter raises bare Exception for unknown rules
            raise InvalidRequest(
                f"guided_decoding_guide is not a valid EBNF grammar: {exc}"
            ) from exc
    raise InvalidRequest(f"unknown guided_decoding_guide_type {guide_type!r}")


class GrammarCache:
    """Compiled matchers for one tokenizer, by (guide type, guide); thread-safe, LRU-bounded.

    The llguidance tokenizer is built on first use (about a millisecond for the tiny
    tokenizers, up to a second for a real one), so a model never asked for guided decoding
    never pays for it.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        vocab_size: int,
        max_grammars: int = DEFAULT_MAX_GRAMMARS,
    ) -> None:
        self._hf_tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_grammars = max_grammars
        self._tokenizer: llguidance.LLTokenizer | None = None
        self._compiled: OrderedDict[tuple[str, str | None], llguidance.LLMatcher] = OrderedDict()
        self._lock = threading.Lock()
        self.compiles = 0  # how many guides were compiled (not found in the cache)

    @property
    def tokenizer(self) -> llguidance.LLTokenizer:
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = llguidance.hf.from_tokenizer(
                    self._hf_tokenizer,  # type: ignore[arg-type]  # fast ones only
                    n_vocab=self.vocab_size,
                )
            return self._tokenizer

    def matcher(self, guide_type: str, guide: str | None) -> llguidance.LLMatcher:
        """A fresh matcher for the guide (a copy of the cached compiled one)."""
        key = (guide_type, None if guide_type == "json" else guide)
        with self._lock:
            cached = self._compiled.get(key)
            if cached is not None:
                self._compiled.move_to_end(key)
                return cached.deep_copy()
        compiled = self._compile(guide_type, guide)
        with self._lock:
            self._compiled[key] = compiled
            while len(self._compiled) > self.max_grammars:
                self._compiled.popitem(last=False)
        return compiled.deep_copy()

    def _compile(self, guide_type: str, guide: str | None) -> llguidance.LLMatcher:
        grammar = grammar_text(guide_type, guide)
        matcher = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise InvalidRequest(
                f"guided_decoding_guide ({guide_type}) does not compile: "
                f"{_first_line(matcher.get_error())}"
            )
        with self._lock:
            self.compiles += 1
        return matcher


def _first_line(message: str) -> str:
    """llguidance appends its parser state and the whole grammar; the cause is on top."""
    return message.strip().split("\n<state>")[0].strip()


class GuidedMask:
    """One request's grammar state: masks each step's logits, then follows the chosen token.

    ``end_id`` is the request's stop token: it is allowed exactly when the grammar may end
    (llguidance marks that by allowing the tokenizer's EOS), and nothing else is allowed once
    the grammar is complete, so generation stops there.
    """

    def __init__(self, matcher: llguidance.LLMatcher, end_id: int, eos_id: int) -> None:
        self.matcher = matcher
        self.end_id = end_id
        self.eos_id = eos_id

    def apply(self, logits: torch.Tensor) -> None:
        """Set every token the grammar forbids to -inf, in place, on a ``[vocab]`` row."""
        allowed = self.allowed(logits.numel())
        logits.masked_fill_(~allowed.to(logits.device), float("-inf"))

    def allowed(self, vocab: int) -> torch.Tensor:
        """Bool ``[vocab]``: which tokens the grammar allows next."""
        raw = torch.frombuffer(bytearray(self.matcher.compute_bitmask()), dtype=torch.uint8)
        bits = (raw[:, None] >> torch.arange(8, dtype=torch.uint8)) & 1  # little-endian words
        allowed = bits.reshape(-1).bool()[:vocab]
        if allowed.numel() < vocab:
            allowed = torch.cat([allowed, torch.zeros(vocab - allowed.numel(), dtype=torch.bool)])
        if self.end_id != self.eos_id and 0 <= self.eos_id < vocab:
            may_end = bool(allowed[self.eos_id])
            allowed[self.eos_id] = False
            if 0 <= self.end_id < vocab:
                allowed[self.end_id] = may_end
        return allowed

    def accept(self, token: int) -> None:
        """Advance the grammar by the chosen token (the stop token ends it)."""
        if token == self.end_id:
            token = self.eos_id
        if not self.matcher.consume_token(token):
            # Only reachable when the caller chose a masked token (a bug, not a bad request).
            raise RuntimeError(
                f"guided decoding: token {token} rejected: {self.matcher.get_error()}"
            )
