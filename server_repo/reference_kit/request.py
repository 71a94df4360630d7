"""The kit's own request, step and statistics types: what the Triton adapter and tests speak.

They are plain frozen/mutable dataclasses with no Triton or torch in them, so the gateway's
end-to-end test can build the same request in-process that it sends over gRPC. Defaults follow
TensorRT-LLM's: no ``top_k``/``top_p`` means greedy, ``end_id`` ``None`` means the tokenizer's EOS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# The guide types TensorRT-LLM's Triton backend maps (``utils.cc``
# ``getGuidedDecodingParamsFromTensors``); any other type string is dropped there, silently.
GUIDE_TYPES = ("json", "json_schema", "regex", "ebnf_grammar")


class InvalidRequest(ValueError):
    """A request the model refuses (bad tensor shape, max_tokens < 1, prompt too long, ...).

    The Triton adapter answers it with an INVALID_ARG error response instead of generating.
    """


@dataclass(frozen=True)
class GenerationRequest:
    """One ensemble-style request: the question (template added server-side) plus options.

    ``images``: llava: float pixels ``[n, 3, 336, 336]`` (already CLIP-preprocessed);
    llava_onevision: raw RGB ``uint8 [n, H, W, 3]``. ``video``: ``uint8 [frames, H, W, 3]``
    (llava_onevision only). ``extra_id`` is the ``prompt_table_extra_id`` KV-reuse key.
    ``image_sizes``: original ``(height, width)`` per image, ``int [n, 2]`` (``image_sizes_input``;
    LLaVA-NeXT unpads its tile features with them). ``decoder_text``: an encoder-decoder
    model's decoder prompt (``decoder_text_input``); empty means its decoder start token.
    ``return_log_probs`` / ``return_generation_logits``: score each token (``Step.log_prob``,
    ``Step.cum_log_prob``) / keep the raw logits it was chosen from (``Step.logits``); nothing
    is computed for them unless asked (``sampling`` documents the values).
    ``guide_type`` / ``guide``: guided decoding (``guided_decoding_guide_type`` /
    ``guided_decoding_guide``; ``guided`` says how), None when not asked.
    """

    text_input: str
    max_tokens: int = 16
    images: np.ndarray | None = None
    video: np.ndarray | None = None
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 0.0
    seed: int = 0
    end_id: int | None = None
    pad_id: int | None = None
    stop_words: tuple[str, ...] = ()
    bad_words: tuple[str, ...] = ()
    min_tokens: int = 0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    length_penalty: float = 1.0
    beam_width: int = 1
    extra_id: int | None = None
    image_sizes: np.ndarray | None = None
    decoder_text: str = ""
    return_log_probs: bool = False
    return_generation_logits: bool = False
    guide_type: str | None = None
    guide: str | None = None
    # LoRA (``lora.py``): the task id, with the adapter's weights and config on first use.
    lora_task_id: int | None = None
    lora_weights: np.ndarray | None = None
    lora_config: np.ndarray | None = None

    @property
    def greedy(self) -> bool:
        """TRT-LLM decodes greedily for these settings (its defaults are top_k 0, top_p 0)."""
        return self.temperature <= 0 or self.top_k == 1 or (self.top_k == 0 and self.top_p == 0)

    def validate(self) -> None:
        """Reject options the reference models cannot honour, before any work is done."""
        if self.max_tokens < 1:
            raise InvalidRequest(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.beam_width != 1:
            raise InvalidRequest("beam_width must be 1: beam search is not supported here")
        if self.top_k < 0:
            raise InvalidRequest(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 <= self.top_p <= 1.0:
            raise InvalidRequest(f"top_p must be within [0, 1], got {self.top_p}")
        if self.repetition_penalty <= 0:
            raise InvalidRequest("repetition_penalty must be > 0")
        if self.min_tokens < 0:
            raise InvalidRequest("min_tokens must be >= 0")
        if self.extra_id is not None and self.extra_id < 1:
            raise InvalidRequest("prompt_table_extra_id must be >= 1")
        if self.guide_type is not None and self.guide_type not in GUIDE_TYPES:
            raise InvalidRequest(f"unknown guided_decoding_guide_type {self.guide_type!r}")
        if self.guide_type not in (None, "json") and self.guide is None:
            # GuidedDecodingParams' check (tensorrt_llm/executor/guidedDecodingParams.cpp).
            raise InvalidRequest("The guide string must be provided unless using GuideType::kJSON.")


@dataclass(frozen=True)
class Step:
    """One generated token and its text decoded alone (special tokens skipped, EOS is "").

    With ``return_log_probs``: ``log_prob`` is what ``output_log_probs`` reports for the token
    and ``cum_log_prob`` what ``cum_log_probs`` reports after it (the running sum of the
    unnormalized log probs, as TensorRT-LLM keeps it). With ``return_generation_logits``:
    ``logits`` is the float32 ``[vocab]`` row of raw model logits the token was chosen from.
    """

    token_id: int
    text: str
    log_prob: float | None = None
    cum_log_prob: float | None = None
    logits: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass
class GenerationStats:
    """Counts reported through num_*_tokens and kv_cache_* outputs; updated live per step.

    ``total_blocks`` is the number of KV blocks the sequence (prompt + generated) occupies;
    ``reused_blocks`` those found in the prefix cache; ``new_blocks`` the rest.
    """

    tokens_per_block: int
    input_tokens: int = 0
    output_tokens: int = 0
    reused_blocks: int = 0
    cancelled: bool = False
    finish_reason: str | None = None

    @property
    def total_blocks(self) -> int:
        return math.ceil((self.input_tokens + self.output_tokens) / self.tokens_per_block)

    @property
    def new_blocks(self) -> int:
        return self.total_blocks - self.reused_blocks


@dataclass
class Completion:
    """A whole generation collected at once (non-streamed text, decoded together)."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    stats: GenerationStats | None = None
