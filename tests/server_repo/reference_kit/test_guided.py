"""Guided decoding in the reference engine: a tiny random model writes grammar-valid output.

Each guide type of TensorRT-LLM's ``guided_decoding_guide_type`` is run through the real
llguidance matcher and the real step loop; validity is judged by independent parsers
(``json`` + ``jsonschema``, Python's ``re``), never by the grammar engine itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import jsonschema
import numpy as np
import pytest

from server_repo.reference_kit import GenerationRequest, InvalidRequest, ReferenceEngine
from server_repo.reference_kit.guided import GrammarCache, strict_schema
from server_repo.reference_kit.pb_tensors import InputNames, parse_request
from tests.server_repo.family_samples import family_media

# Strings are bounded: a random model picks the closing quote about once in a vocabulary's
# worth of tokens, so an unbounded string would run to max_tokens.
NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "kind": {"enum": ["cat", "dog", "bird"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 30},
        "score": {"type": "number", "minimum": -1, "maximum": 1},
        "tags": {
            "type": "array",
            "items": {"type": "string", "maxLength": 4},
            "minItems": 1,
            "maxItems": 3,
        },
        "owner": {
            "type": "object",
            "properties": {
                "alive": {"type": "boolean"},
                "pet": {"anyOf": [{"type": "null"}, {"enum": ["yes", "no"]}]},
            },
            "required": ["alive", "pet"],
        },
        "note": {"type": "string", "maxLength": 5},
    },
    "required": ["name", "kind", "age", "score", "tags", "owner"],
}


def _guided(
    engine: ReferenceEngine, guide_type: str, guide: str | None, seed: int = 0, **options: object
) -> tuple[str, str | None]:
    options = {"max_tokens": 1000, "temperature": 1.0, "top_k": 40, **options}
    request = GenerationRequest(
        "Describe.", seed=seed, guide_type=guide_type, guide=guide, **options
    )
    completion = engine.complete(request)
    assert completion.stats is not None
    return completion.text, completion.stats.finish_reason


@pytest.mark.parametrize("seed", range(6))
def test_json_schema_output_validates(llava_engine: ReferenceEngine, seed: int) -> None:
    text, finish = _guided(llava_engine, "json_schema", json.dumps(NESTED_SCHEMA), seed)
    assert finish == "end_id", text
    value = json.loads(text)
    jsonschema.validate(value, NESTED_SCHEMA)
    # xgrammar's strict mode, as TensorRT-LLM compiles schemas: no property beyond those named.
    assert set(value) <= set(NESTED_SCHEMA["properties"])
    assert set(value["owner"]) == {"alive", "pet"}


def test_greedy_json_schema_validates(llava_engine: ReferenceEngine) -> None:
    text, finish = _guided(llava_engine, "json_schema", json.dumps(NESTED_SCHEMA), top_k=1)
    assert finish == "end_id"
    jsonschema.validate(json.loads(text), NESTED_SCHEMA)


@pytest.mark.parametrize("seed", range(4))
def test_regex_output_full_matches(llava_engine: ReferenceEngine, seed: int) -> None:
    pattern = r"(cat|dog)-[a-z]{2,5}-\d{2}"
    text, finish = _guided(llava_engine, "regex", pattern, seed)
    assert finish == "end_id"
    assert re.fullmatch(pattern, text), text


@pytest.mark.parametrize("seed", range(4))
def test_ebnf_grammar_is_respected(llava_engine: ReferenceEngine, seed: int) -> None:
    grammar = r"""
root ::= "answer: " item (", " item)* "."
item ::= ("red" | "green" | "blue") " " [0-9]{1,2}
"""
    text, finish = _guided(llava_engine, "ebnf_grammar", grammar, seed)
    assert finish == "end_id"
    assert re.fullmatch(r"answer: (red|green|blue) \d{1,2}(, (red|green|blue) \d{1,2})*\.", text)


@pytest.mark.parametrize("seed", range(4))
def test_json_gives_an_object_or_array_and_ignores_the_guide(
    llava_engine: ReferenceEngine, seed: int
) -> None:
    # xgrammar's built-in JSON grammar (what TensorRT-LLM compiles for ``json``): object | array.
    text, finish = _guided(llava_engine, "json", '{"type": "string"}', seed, max_tokens=1000)
    assert finish == "end_id", text
    assert isinstance(json.loads(text), dict | list)


@pytest.mark.parametrize(
    ("guide_type", "guide", "message"),
    [
        ("json_schema", '{"type": "foo"}', "does not compile"),
        ("json_schema", "{not json", "not valid JSON"),
        ("json_schema", "[1, 2]", "schema object"),
        ("regex", "a(b", "does not compile"),
        ("ebnf_grammar", "root ::= (", "not a valid EBNF"),
        ("ebnf_grammar", "root ::= missing", "not a valid EBNF"),
        ("json_schema", None, "guide string must be provided"),
    ],
)
def test_a_guide_that_does_not_compile_is_refused_before_generation(
    llava_engine: ReferenceEngine, guide_type: str, guide: str | None, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        llava_engine.generate(GenerationRequest("q", guide_type=guide_type, guide=guide))


def test_unguided_requests_compute_nothing_and_are_unchanged(
    llava_engine: ReferenceEngine,
) -> None:
    fresh = ReferenceEngine(llava_engine.arch, llava_engine.assets)
    request = GenerationRequest("Describe.", max_tokens=12, temperature=1.0, top_k=40, seed=3)
    plain = fresh.complete(request)
    assert fresh.grammars._tokenizer is None and fresh.grammars.compiles == 0
    assert plain.token_ids == llava_engine.complete(request).token_ids


def test_compiled_grammars_are_cached_by_type_and_guide(llava_engine: ReferenceEngine) -> None:
    fresh = ReferenceEngine(llava_engine.arch, llava_engine.assets)
    schema = json.dumps({"type": "object", "properties": {"k": {"enum": ["a", "b"]}}})
    first = _guided(fresh, "json_schema", schema, seed=5)
    assert _guided(fresh, "json_schema", schema, seed=5) == first  # a copy, not a used matcher
    _guided(fresh, "regex", "[ab]{3}")
    _guided(fresh, "json", None)
    _guided(fresh, "json", "ignored")
    assert fresh.grammars.compiles == 3


def test_the_cache_is_bounded(llava_engine: ReferenceEngine) -> None:
    cache = GrammarCache(llava_engine.tokenizer, 430, max_grammars=2)
    for digits in (1, 2, 3):
        cache.matcher("regex", f"[0-9]{{{digits}}}")
    cache.matcher("regex", "[0-9]{1}")
    assert cache.compiles == 4


def test_end_id_only_when_the_grammar_accepts(llava_engine: ReferenceEngine) -> None:
    eos = llava_engine.eos_token_id
    completion = llava_engine.complete(
        GenerationRequest("q", max_tokens=40, guide_type="regex", guide=r"\d{5}", top_k=40)
    )
    assert completion.token_ids[-1] == eos and eos not in completion.token_ids[:-1]
    assert re.fullmatch(r"\d{5}", completion.text)
    # max_tokens still cuts a guided generation short (a prefix of a valid output).
    short = llava_engine.complete(
        GenerationRequest("q", max_tokens=2, guide_type="regex", guide=r"[a-z]{10}", top_k=40)
    )
    assert short.stats is not None and short.stats.finish_reason == "length"
    assert re.fullmatch(r"[a-z]{1,10}", short.text)


def test_a_request_end_id_takes_the_grammar_stop(llava_engine: ReferenceEngine) -> None:
    end_id = llava_engine.encode("!")[0]
    completion = llava_engine.complete(
        GenerationRequest("q", max_tokens=20, end_id=end_id, guide_type="regex", guide="[ab]{4}")
    )
    assert completion.token_ids[-1] == end_id
    assert re.fullmatch("[ab]{4}!", llava_engine.decode(completion.token_ids))


def test_min_tokens_yields_to_a_complete_grammar(llava_engine: ReferenceEngine) -> None:
    completion = llava_engine.complete(
        GenerationRequest("q", max_tokens=20, min_tokens=10, guide_type="regex", guide="ab")
    )
    assert completion.text == "ab"
    assert completion.token_ids[-1] == llava_engine.eos_token_id


def test_log_probs_are_scored_under_the_mask(llava_engine: ReferenceEngine) -> None:
    # One allowed token per step ("yes" spelled by a fixed path) leaves log q = 0 for it.
    completion = llava_engine.complete(
        GenerationRequest(
            "q", max_tokens=10, guide_type="regex", guide="x", return_log_probs=True, top_k=40
        )
    )
    assert completion.text == "x"
    assert all(step.log_prob == pytest.approx(0.0, abs=1e-5) for step in completion.steps)


def test_encoder_decoder_models_are_guided_too(
    family_engine: Callable[[str], ReferenceEngine],
) -> None:
    media = family_media("blip2_t5", 0)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    request = media.request(
        "blip2_t5", 80, guide_type="json_schema", guide=json.dumps(schema), top_k=40
    )
    value = json.loads(family_engine("blip2_t5").complete(request).text)
    jsonschema.validate(value, schema)


def test_strict_schema_closes_objects_but_not_data() -> None:
    schema = {
        "type": "object",
        "properties": {
            "properties": {"type": "object", "properties": {"x": {"const": {"a": 1}}}},
            "open": {"type": "object", "additionalProperties": True},
        },
        "$defs": {"d": {"properties": {"y": {}}}},
    }
    strict = strict_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["properties"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["properties"]["properties"]["x"]
    assert strict["properties"]["properties"]["properties"]["x"]["const"] == {"a": 1}
    assert strict["properties"]["open"]["additionalProperties"] is True
    assert strict["$defs"]["d"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]  # a map of names, not a schema


def _tensor(value: str) -> np.ndarray:
    return np.array([[value.encode()]], dtype=np.object_)


BASE = {"text_input": _tensor("q"), "max_tokens": np.array([[4]], dtype=np.int32)}


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({}, (None, None)),
        ({"guided_decoding_guide_type": "regex", "guided_decoding_guide": "a+"}, ("regex", "a+")),
        ({"guided_decoding_guide_type": "json"}, ("json", None)),
        (
            {"guided_decoding_guide_type": "json_schema", "guided_decoding_guide": ""},
            ("json_schema", ""),
        ),
        # TensorRT-LLM drops an unknown type silently, and a guide without a type.
        (
            {"guided_decoding_guide_type": "structural_tag", "guided_decoding_guide": "{}"},
            (None, None),
        ),
        ({"guided_decoding_guide": "a+"}, (None, None)),
    ],
)
def test_guide_tensors_are_read_as_trt_llm_reads_them(
    inputs: dict[str, str], expected: tuple[str | None, str | None]
) -> None:
    tensors = {**BASE, **{name: _tensor(value) for name, value in inputs.items()}}
    request, _ = parse_request(tensors, InputNames())
    assert (request.guide_type, request.guide) == expected
