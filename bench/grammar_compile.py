"""Grammar cost in the reference models: compiling a large JSON schema, a cache hit, a step.

``python -m bench.grammar_compile [--properties N] [--repeat R]`` loads the tiny LLaVA
reference model on CPU and times, with ``server_repo/reference_kit/guided.py``:

- the first compile of a schema of N properties (nested objects, enums, bounded arrays and
  numbers, ``anyOf``) through a fresh ``GrammarCache`` (the llguidance tokenizer built first,
  timed apart);
- a cache hit (a copy of the compiled matcher, what every repeated schema costs);
- one step's mask (bitmask to a -inf fill of the logits row) and one generated request with
  and without the schema, per token (the fastest of R runs: the figure least disturbed by
  other work on the machine).

The tiny tokenizer has a few hundred tokens; llguidance's mask cost grows with the
vocabulary, so these figures are a floor for a real model's 32k-150k.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def large_schema(properties: int) -> dict[str, Any]:
    """An object schema of ``properties`` fields cycling through the usual shapes."""
    shapes: list[dict[str, Any]] = [
        {"type": "string", "maxLength": 8},
        {"enum": ["red", "green", "blue", "other"]},
        {"type": "integer", "minimum": 0, "maximum": 1000},
        {"type": "number", "minimum": -1, "maximum": 1},
        {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
        {
            "type": "object",
            "properties": {"a": {"type": "boolean"}, "b": {"enum": ["x", "y"]}},
            "required": ["a"],
        },
        {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 4}]},
    ]
    names = [f"field_{i}" for i in range(properties)]
    return {
        "type": "object",
        "properties": {name: shapes[i % len(shapes)] for i, name in enumerate(names)},
        "required": names[: properties // 2],
    }


def _ms(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and minimum wall time of ``action`` in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), min(times)


def run(properties: int, repeat: int) -> dict[str, float]:
    from server_repo.reference_kit import GenerationRequest, load_engine
    from server_repo.reference_kit.guided import GrammarCache, GuidedMask

    engine = load_engine("llava", device="cpu")
    vocab = int(engine.model.config.get_text_config(decoder=True).vocab_size)
    guide = json.dumps(large_schema(properties))
    figures: dict[str, float] = {"vocab": vocab, "schema_chars": len(guide)}
    compiles = []
    for _ in range(repeat):
        cache = GrammarCache(engine.tokenizer, vocab)
        started = time.perf_counter()
        cache.tokenizer  # noqa: B018  (built on first use; timed apart)
        figures["tokenizer_ms"] = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        cache.matcher("json_schema", guide)
        compiles.append((time.perf_counter() - started) * 1000)
    figures["compile_ms_median"] = statistics.median(compiles)
    figures["cache_hit_ms_median"], _ = _ms(lambda: cache.matcher("json_schema", guide), repeat)
    mask = GuidedMask(cache.matcher("json_schema", guide), engine.eos_token_id, engine.eos_token_id)
    row = torch.zeros(vocab)
    figures["mask_step_ms_median"], _ = _ms(lambda: mask.apply(row.clone()), repeat * 10)
    for label, options in (
        ("plain", {}),
        ("guided", {"guide_type": "json_schema", "guide": guide}),
    ):
        request = GenerationRequest("Describe.", max_tokens=64, top_k=40, seed=1, **options)
        tokens = len(engine.complete(request).token_ids)  # warm; guided: compiled and cached
        _, fastest = _ms(lambda request=request: engine.complete(request), repeat)
        figures[f"{label}_tokens"] = tokens
        figures[f"{label}_ms_per_token_min"] = fastest / max(1, tokens)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--properties", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for key, value in run(args.properties, args.repeat).items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
