"""What one response of NVIDIA's ``llmapi`` model carries, as numpy arrays without a batch dim.

As NVIDIA's model.py (TensorRT-LLM triton_backend/all_models/llmapi/tensorrt_llm/1/model.py at
044a90d209e380c95e23e8ae42f3583fa05ada78, ``_create_response``) fills them from the LLM API's
``RequestOutput``:

- ``text_output`` ``[1]``: the *cumulative* text (``CompletionOutput.text``), every streamed
  response holding all of it so far; with ``exclude_input_from_output`` false (the default)
  the prompt, decoded without its special tokens, comes first.
- ``finish_reason`` / ``stop_reason`` ``[1]`` only when asked: ``str()`` of the LLM API's
  values, so a response before the last says ``"None"``; the last says ``"stop"`` (EOS or a
  stop string), ``"length"`` or ``"cancelled"``, and ``stop_reason`` names the stop string.
- ``cumulative_logprob`` ``[1]`` when asked; the KV-cache and timing outputs with
  ``sampling_param_return_perf_metrics``.

NVIDIA's model.py writes every one of these as a NumPy object array (``str()`` of the value, or
the number in ``text_output``'s object dtype), and the Python backend does not hold an output
to the dtype its config declares: on the wire they are BYTES (``b"5"``, ``b"0.25"``,
``b"None"``), whatever config.pbtxt says (FP32, INT32, INT64). This reference sends them the
same way, so a client tested against it reads what NVIDIA's model sends.

A stop string is matched on tokens, as the LLM API matches it, and left out of the text. While
the newest tokens could still be the start of one, ``TextTracker`` holds them back, so the
cumulative text of a stream never shrinks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from server_repo.reference_kit.llmapi_request import LlmapiOptions
from server_repo.reference_kit.request import GenerationStats

# The kit's stop reasons -> the LLM API's finish_reason.
FINISH_REASONS = {"end_id": "stop", "stop_word": "stop", "length": "length"}


@dataclass
class Timing:
    """Monotonic nanosecond stamps, as TensorRT-LLM's per-request timing metrics."""

    arrival_ns: int
    first_scheduled_ns: int = 0
    first_token_ns: int = 0
    last_token_ns: int = 0


class TextTracker:
    """Generated tokens -> the cumulative text to send, stop strings withheld and removed."""

    def __init__(
        self,
        decode: Callable[[list[int]], str],
        stop_words: Sequence[tuple[str, Sequence[int]]],
        prefix: str = "",
    ) -> None:
        self.decode = decode
        self.stop_words = [(text, tuple(ids)) for text, ids in stop_words if ids]
        self.prefix = prefix
        self.tokens: list[int] = []
        self.stop_reason: str | None = None

    def add(self, token_id: int) -> None:
        self.tokens.append(token_id)

    def _held(self) -> int:
        """How many newest tokens may begin a stop string (and so are not shown yet)."""
        held = 0
        for _, ids in self.stop_words:
            for size in range(min(len(ids) - 1, len(self.tokens)), held, -1):
                if tuple(self.tokens[-size:]) == ids[:size]:
                    held = size
                    break
        return held

    def visible(self) -> str:
        """The text so far, without tokens that may still turn out to be a stop string."""
        return self.prefix + self.decode(self.tokens[: len(self.tokens) - self._held()])

    def final(self, kit_reason: str | None) -> str:
        """The whole text once generation ended for ``kit_reason``; a matched stop string is
        cut off and becomes ``stop_reason``."""
        tokens = self.tokens
        if kit_reason == "stop_word":
            for text, ids in self.stop_words:
                if tuple(tokens[-len(ids) :]) == ids:
                    self.stop_reason, tokens = text, tokens[: -len(ids)]
                    break
        return self.prefix + self.decode(tokens)


def finish_reason(stats: GenerationStats) -> str:
    """The LLM API's finish reason for a generation that has ended."""
    if stats.cancelled:
        return "cancelled"
    return FINISH_REASONS.get(stats.finish_reason or "", "stop")


def _one(value: object) -> np.ndarray:
    """``[str(value)]`` as a BYTES tensor, as NVIDIA's model.py sends every output."""
    return np.array([str(value).encode("utf-8")], dtype=np.object_)


def perf_outputs(stats: GenerationStats, timing: Timing) -> dict[str, np.ndarray]:
    """KV-cache reuse (a real count from the prefix cache) and timing; no draft model here."""
    prompt_blocks = math.ceil(stats.input_tokens / stats.tokens_per_block)
    reused = stats.reused_blocks
    hit_rate = reused / prompt_blocks if prompt_blocks else 0.0
    return {
        "kv_cache_reused_block": _one(reused),
        "kv_cache_missed_block": _one(prompt_blocks - reused),
        "kv_cache_alloc_new_blocks": _one(stats.new_blocks),
        "kv_cache_alloc_total_blocks": _one(stats.total_blocks),
        "kv_cache_hit_rate": _one(hit_rate),
        "arrival_time_ns": _one(timing.arrival_ns),
        "first_scheduled_time_ns": _one(timing.first_scheduled_ns),
        "first_token_time_ns": _one(timing.first_token_ns),
        "last_token_time_ns": _one(timing.last_token_ns),
        "acceptance_rate": _one(0.0),
        "total_accepted_draft_tokens": _one(0),
        "total_draft_tokens": _one(0),
    }


@dataclass(frozen=True)
class ResponseState:
    """One response's values: its cumulative text and, on the last, why it ended."""

    text: str
    finish_reason: str | None = None
    stop_reason: str | None = None
    cumulative_logprob: float = 0.0


def response_outputs(
    state: ResponseState, stats: GenerationStats, timing: Timing, options: LlmapiOptions
) -> dict[str, np.ndarray]:
    """The output arrays of one response: ``text_output`` and the ones the request asked for."""
    outputs = {"text_output": np.array([state.text.encode("utf-8")], dtype=np.object_)}
    if options.finish_reason:
        outputs["finish_reason"] = _one(state.finish_reason)
    if options.stop_reason:
        outputs["stop_reason"] = _one(state.stop_reason)
    if options.cumulative_logprob:
        outputs["cumulative_logprob"] = _one(state.cumulative_logprob)
    if options.perf_metrics:
        outputs |= perf_outputs(stats, timing)
    return outputs
