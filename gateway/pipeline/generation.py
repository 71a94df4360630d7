"""What every text endpoint decides the same way: sampling, lengths, end ids, seeds, stops,
the caps on what costs work, and vLLM's extensions the engine cannot honour.

Chat completions and legacy completions both end in one ``GenerationRequest`` drafted here
from the request's OpenAI fields (``TextFields``: the two request types share them), so a
field is honoured or refused the same way on every endpoint.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from gateway.errors import InvalidRequest
from gateway.families.calls import GenerationRequest, Guide, Sampling
from gateway.pipeline.lora import LoraChoice
from gateway.pipeline.media import PreparedMedia
from gateway.served import ServedRuntime


class TextFields(Protocol):
    """The OpenAI (and vLLM) generation fields chat and completions requests share."""

    @property
    def temperature(self) -> float | None: ...
    @property
    def top_p(self) -> float | None: ...
    @property
    def top_k(self) -> int | None: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def min_tokens(self) -> int | None: ...
    @property
    def presence_penalty(self) -> float | None: ...
    @property
    def frequency_penalty(self) -> float | None: ...
    @property
    def repetition_penalty(self) -> float | None: ...
    @property
    def ignore_eos(self) -> bool: ...
    @property
    def stream(self) -> bool: ...
    @property
    def stream_options(self) -> Any: ...
    @property
    def model_extra(self) -> dict[str, Any] | None: ...


# No tokenizer in use covers more than this many characters with one token, so a prompt longer
# than this many characters per allowed token cannot fit whatever the tokenizer.
CHARS_PER_TOKEN_BOUND = 32


def check_prompt_size(text: str, served: ServedRuntime, param: str = "messages") -> None:
    """Refuse a prompt that cannot fit before Triton spends seconds tokenising it."""
    max_chars = served.policy.max_prompt_chars
    if served.config.max_input_tokens is not None:
        max_chars = min(max_chars, served.config.max_input_tokens * CHARS_PER_TOKEN_BOUND)
    if len(text) > max_chars:
        raise InvalidRequest(
            f"the prompt is {len(text)} characters long; model '{served.config.id}' accepts "
            f"at most {max_chars}",
            param=param,
            code="context_length_exceeded",
        )


def check_total_prompt(sizes: Sequence[int], n: int, max_chars: int, param: str) -> None:
    """Refuse a request whose prompts, once per choice, are more text than one request may
    send: each (prompt, choice) is a Triton request of its own, tokenised on its own, and
    work Triton's preprocessing has started is not stopped by a cancel."""
    total = sum(sizes) * n
    if total > max_chars:
        copies = f"{len(sizes)} prompt(s) x n={n}" if n > 1 else f"{len(sizes)} prompts"
        raise InvalidRequest(
            f"this request sends {copies}: {total} characters for Triton to tokenise; at "
            f"most {max_chars} in all ([generation] max_total_prompt_chars); ask for fewer "
            "choices or send shorter prompts",
            param="n" if n > 1 else param,
            code="context_length_exceeded",
        )


# vLLM's request extensions the engine behind this gateway cannot honour: refused when set to
# anything but their default, so a client written for vLLM is never silently misled.
VLLM_EXTENSIONS: dict[str, object] = {
    "use_beam_search": False,
    "best_of": None,
    "length_penalty": None,
    "prompt_logprobs": None,
    "include_stop_str_in_output": False,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "min_p": None,
    "stop_token_ids": None,
    "allowed_token_ids": None,
    "bad_words": None,
    "truncate_prompt_tokens": None,
    "echo": False,
    "add_generation_prompt": True,
    "continue_final_message": False,
    "add_special_tokens": False,
    "chat_template": None,
    "chat_template_kwargs": None,
    "mm_processor_kwargs": None,
    "documents": None,
    "guided_whitespace_pattern": None,
    "priority": None,
    "return_tokens_as_token_ids": None,
}


def refuse(request: TextFields, refusals: dict[str, tuple[str, bool]]) -> None:
    """A 400 naming the first field the engine cannot honour (``refusals``: field ->
    (why, whether this request uses it)), stream options without a stream, or a vLLM
    extension set away from its default: never a silent drop."""
    for param, (message, refused) in refusals.items():
        if refused:
            raise InvalidRequest(message, param=param, code="unsupported_parameter")
    if request.stream_options is not None and not request.stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )
    refuse_extensions(request)


def refuse_extensions(request: TextFields) -> None:
    extra = request.model_extra or {}
    for name, default in VLLM_EXTENSIONS.items():
        if name in extra and extra[name] not in (None, default):
            raise InvalidRequest(
                f"'{name}' is not supported by this gateway", param=name,
                code="unsupported_parameter",
            )  # fmt: skip
    options = extra.get("stream_options") or {}
    if request.stream_options is not None:
        options = request.stream_options.model_extra or {}
    if options.get("continuous_usage_stats"):
        raise InvalidRequest(
            "'stream_options.continuous_usage_stats' is not supported: usage comes with the "
            "last chunk",
            param="stream_options.continuous_usage_stats",
            code="unsupported_parameter",
        )


def max_tokens(requested: int | None, param: str, served: ServedRuntime) -> int:
    """The request's max_tokens within the server's cap (the model's ``policy``). A request
    that names none may run to what the engine has room for, never to a small default: the
    engine's ``max_seq_len`` when it is known (TensorRT-LLM reduces a max_tokens past it to
    ``max_seq_len`` minus the prompt: NVIDIA/TensorRT-LLM
    cpp/tensorrt_llm/batch_manager/llmRequest.cpp, ``LlmRequest::validate``, commit
    119c6e60e65e5ecec4e97afdb6ea584f674aed24), else the server's cap; an operator's
    ``default_max_tokens`` instead where one is configured."""
    cap = served.policy.max_tokens
    if requested is not None:
        if requested > cap:
            raise InvalidRequest(
                ((param,), f" is {requested}; this gateway allows at most {cap}"), param=param
            )
        return requested
    if served.policy.default_max_tokens is not None:
        return served.policy.default_max_tokens
    return served.max_seq_len or cap


def end_ids(served: ServedRuntime) -> tuple[int | None, int | None]:
    """(end_id, pad_id) to send: configured, else the family's; ``"server"`` sends none."""
    configured = served.config.end_id
    family = served.family
    end_id = None if configured == "server" else configured or family.default_end_id
    pad = served.config.pad_id
    pad_id = None if pad == "server" else pad if pad is not None else family.default_pad_id
    return (end_id if isinstance(end_id, int) else None), pad_id


def fresh_seed(request: TextFields, choice: int = 0) -> int | None:
    """The request's seed (plus the choice's index, so ``n`` choices differ, reproducibly),
    else a fresh one: TensorRT-LLM seeds every request 0 by default, so two identical
    sampled requests would otherwise give the same text."""
    if request.seed is not None:
        return (request.seed + choice) % 2**64
    if request.temperature == 0:
        return None  # greedy: the seed changes nothing
    # Not ``secrets``: a sampling seed guards nothing, and the OS's generator cost a system
    # call per request (3 us, a few percent of a request's way to its Triton call).
    return random.getrandbits(63)


def draft(
    request: TextFields,
    served: ServedRuntime,
    stream: bool,
    text_input: str,
    requested: tuple[int | None, str],
    media: PreparedMedia | None = None,
    stops: Sequence[str] = (),
    lora: LoraChoice | None = None,
    choice: int = 0,
    guide: Guide | None = None,
    reasoning_effort: str | None = None,
) -> GenerationRequest:
    """The request's inputs in neutral names; ``build_inputs`` sends what the model declares.
    ``requested``: the max tokens asked for and the field that asked (``max_tokens``...).
    ``choice``: which of the request's ``n`` choices: each gets a seed of its own."""
    family = served.family
    end_id, pad_id = end_ids(served)
    if request.ignore_eos:
        end_id = -1  # TensorRT-LLM: never stop at the end-of-sequence token
    images = media.tensor if media is not None and media.samples is None else None
    return GenerationRequest(
        text_input=text_input,
        max_tokens=max_tokens(*requested, served),
        stream=stream,
        sampling=Sampling(
            request.temperature, request.top_p, request.top_k, fresh_seed(request, choice)
        ),
        min_tokens=request.min_tokens,
        end_id=end_id,
        pad_id=pad_id,
        presence_penalty=request.presence_penalty,
        frequency_penalty=request.frequency_penalty,
        repetition_penalty=request.repetition_penalty,
        # Families whose preprocessing keys its own vision positions (qwen2_vl) get no id.
        prompt_table_extra_id=media.extra_id if media and family.supports_extra_id else None,
        images=images,
        image_sizes=media.image_sizes if media else None,
        decoder_text_input=family.decoder_prompt,
        stop_words=tuple(stops),
        lora_task_id=lora.task_id if lora else None,
        lora_weights=lora.weights if lora else None,
        lora_config=lora.config if lora else None,
        guide=guide,
        reasoning_effort=reasoning_effort,
    )
