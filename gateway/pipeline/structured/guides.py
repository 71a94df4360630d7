"""What output a request asks to be constrained to, as one TensorRT-LLM guide.

Three spellings reach the same four guide types: OpenAI's ``response_format`` (``json_object``
-> ``json``; ``json_schema`` -> ``json_schema`` with the schema unwrapped from its ``{name,
schema, strict}`` envelope, as trtllm-serve does), vLLM's ``structured_outputs`` (``json``,
``regex``, ``choice``, ``grammar``, ``json_object``) and vLLM's older ``guided_json`` /
``guided_regex`` / ``guided_choice`` / ``guided_grammar``. A request may use one of them once;
``choice`` becomes a regex of the choices, written literally. Every guide is measured and
compiled (``compile.py``, in a sandbox) and the served model must declare the guide inputs,
else a 400 that says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequest
from gateway.families.calls import Guide
from gateway.guides import GuideChecker
from gateway.location import Location
from gateway.protocol.structured import ResponseFormat
from gateway.triton.contract import ModelContract
from gateway.triton.tensors import GUIDE_INPUTS

# vLLM's structured_outputs keys and the guide type each becomes.
STRUCTURED_KEYS = {"json": "json_schema", "regex": "regex", "choice": "regex",
                   "grammar": "ebnf_grammar", "json_object": "json"}  # fmt: skip
LEGACY_KEYS = {"guided_json": "json", "guided_regex": "regex", "guided_choice": "choice",
               "guided_grammar": "grammar"}  # fmt: skip
# structured_outputs keys that change nothing when left at these values.
NEUTRAL_KEYS = {"disable_fallback": (None, False), "disable_any_whitespace": (None, False),
                "disable_additional_properties": (None, False), "whitespace_pattern": (None,),
                "structural_tag": (None,), "_backend": (None,), "backend": (None, "xgrammar"),
                "_backend_was_auto": (None, False)}  # fmt: skip
BACKENDS = (None, "auto", "xgrammar")  # guided_decoding_backend values TensorRT-LLM honours
REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")
_ESCAPES = str.maketrans({c: "\\" + c for c in REGEX_SPECIAL})
FLAG = "mmgw trtllm-repo --guided-decoding"


@dataclass(frozen=True)
class Asked:
    """The guide a request asked for, and the field that asked (for its errors)."""

    guide: Guide
    param: Location  # ("response_format",), ("tools", 0, "function", "parameters")


def requested_guide(
    response_format: ResponseFormat | None, extra: dict[str, Any] | None
) -> Asked | None:
    """The one guide a request's fields ask for (none: None); two sources are a 400."""
    extra = extra or {}
    asked: list[Asked] = []
    if response_format is not None and response_format.type != "text":
        asked.append(Asked(_response_format(response_format), ("response_format",)))
    structured = extra.get("structured_outputs")
    if structured is not None:
        asked.append(_structured(structured))
    for key, kind in LEGACY_KEYS.items():
        if extra.get(key) is not None:
            asked.append(Asked(_vllm_guide(kind, extra[key], key), (key,)))
    backend = extra.get("guided_decoding_backend")
    if backend not in BACKENDS:
        raise InvalidRequest(
            f"guided_decoding_backend {backend!r} is not available: TensorRT-LLM decodes "
            "guides with xgrammar",
            param="guided_decoding_backend",
            code="unsupported_parameter",
        )
    if len(asked) > 1:
        raise InvalidRequest(
            (
                "'",
                asked[1].param,
                "' and '",
                asked[0].param,
                "' both constrain the output; send one",
            ),
            param=asked[1].param,
        )
    return asked[0] if asked else None


# OpenAI's json_object means an object. TensorRT-LLM's guide type ``json`` is xgrammar's
# built-in JSON grammar, which admits an array too, so an object is asked for by schema.
JSON_OBJECT = Guide("json_schema", json.dumps({"type": "object"}))


def _response_format(response_format: ResponseFormat) -> Guide:
    if response_format.type == "json_object":
        return JSON_OBJECT
    if response_format.type != "json_schema":
        raise InvalidRequest(
            f"response_format type {response_format.type!r} is not supported: use 'text', "
            "'json_object' or 'json_schema'",
            param="response_format.type",
            code="unsupported_parameter",
        )
    if response_format.json_schema is None:
        raise InvalidRequest(
            "response_format type 'json_schema' needs a 'json_schema' object",
            param="response_format.json_schema",
        )
    schema = response_format.json_schema.schema_
    return Guide("json") if schema is None else Guide("json_schema", json.dumps(schema))


def _structured(structured: object) -> Asked:
    if not isinstance(structured, dict):
        raise InvalidRequest("structured_outputs must be an object", param="structured_outputs")
    for key, neutral in NEUTRAL_KEYS.items():
        if structured.get(key) not in neutral:
            raise InvalidRequest(
                f"structured_outputs.{key} is not supported by this gateway",
                param=f"structured_outputs.{key}",
                code="unsupported_parameter",
            )
    unknown = sorted(set(structured) - set(STRUCTURED_KEYS) - set(NEUTRAL_KEYS))
    if unknown:
        raise InvalidRequest(
            f"structured_outputs.{unknown[0]} is not a structured output option",
            param=f"structured_outputs.{unknown[0]}",
        )
    kinds = [k for k in STRUCTURED_KEYS if structured.get(k) not in (None, False)]
    if len(kinds) != 1:
        raise InvalidRequest(
            "structured_outputs needs exactly one of json, regex, choice, grammar, json_object"
            + (f"; it has {kinds}" if kinds else ""),
            param="structured_outputs",
        )
    param = f"structured_outputs.{kinds[0]}"
    return Asked(
        _vllm_guide(kinds[0], structured[kinds[0]], param), ("structured_outputs", kinds[0])
    )


def _vllm_guide(kind: str, value: object, param: str) -> Guide:
    """One of vLLM's constraints as a guide; a value of the wrong shape is a 400."""
    if kind == "json_object":
        return JSON_OBJECT
    if kind == "json" and isinstance(value, dict):
        return Guide("json_schema", json.dumps(value))
    if kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
            raise InvalidRequest(f"{param} must be a non-empty list of strings", param=param)
        return Guide("regex", "|".join(f"({literal_regex(c)})" for c in value))
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{param} must be a non-empty string", param=param)
    if kind == "json":  # a schema sent as JSON text
        return Guide("json_schema", value)
    return Guide("regex" if kind == "regex" else "ebnf_grammar", value)


def literal_regex(text: str) -> str:
    """``text`` as a regex matching it exactly; only the metacharacters escaped, which both
    llguidance and xgrammar read the same way (``str.translate``: C speed, as a choice list
    may be long)."""
    return text.translate(_ESCAPES)


async def check_guide(
    asked: Asked,
    contract: ModelContract,
    model_id: str,
    guides: GuideChecker,
    suspects: Sequence[Asked] = (),
) -> Guide:
    """The guide, once the served model can take it and the grammar engine compiles it. When
    it does not, and it was assembled from ``suspects`` (the tools a ``required`` choice may
    call), the first of them that does not compile alone is named instead of the whole."""
    missing = [name for name in GUIDE_INPUTS if not contract.declares(name)]
    if missing:
        raise InvalidRequest(
            (
                "'",
                asked.param,
                f"' needs guided decoding, and model '{model_id}' (Triton "
                f"model '{contract.name}') does not declare the inputs {missing}; `{FLAG}` "
                "assembles a repository whose ensemble takes them",
            ),
            param=asked.param,
            code="unsupported_parameter",
        )
    error = await guides.error(asked.guide)
    if error is None:
        return asked.guide
    for suspect in suspects:
        own = await guides.error(suspect.guide)
        if own is not None:
            raise _invalid(suspect, own)
    raise _invalid(asked, error)


def _invalid(asked: Asked, error: str) -> InvalidRequest:
    what = {"json_schema": "JSON schema", "regex": "regex", "ebnf_grammar": "grammar"}
    kind = what.get(asked.guide.type, "guide")
    return InvalidRequest(
        (f"the {kind} in '", asked.param, f"' cannot be compiled: {error}"),
        param=asked.param,
        code="invalid_guide",
    )
