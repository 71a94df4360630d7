"""What NVIDIA's llmapi Triton model cannot take, refused by name before the first byte: the
fields it has no input for, guided decoding, media other than images, prompts over the
engine's length (helpers.py @0df60f9ad779c4dc4f55da07e08b969fc4684e56 reads no guide, no
logprobs, no min_tokens)."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.errors import InvalidRequest
from gateway.families.calls import Guide
from gateway.pipeline.conversation import MediaPart
from gateway.pipeline.generation import TextFields
from gateway.pipeline.structured.guides import Asked
from gateway.protocol.chat import ChatCompletionRequest
from gateway.served import ServedRuntime

_NO_INPUT = (
    "NVIDIA's llmapi Triton model reads no {input} input (helpers.py "
    "get_sampling_params_from_request): it cannot honour '{field}'"
)


def refuse_fields(request: TextFields, logprobs: bool, lora: int | None) -> None:
    """Every field NVIDIA's model has no input for, when the request sets it: a 400 naming
    both the field and the missing input."""
    refused = {
        "min_tokens": ("sampling_param_min_tokens", request.min_tokens not in (None, 0)),
        "repetition_penalty": (
            "sampling_param_repetition_penalty",
            request.repetition_penalty is not None,
        ),
        "ignore_eos": ("sampling_param_ignore_eos", request.ignore_eos),
        "logprobs": ("per-token logprobs (only return_cumulative_logprob)", logprobs),
        "lora_task_id": ("lora_task_id (its LoRA inputs are lora_id/lora_name/lora_path)", lora),
    }
    for field, (missing, used) in refused.items():
        if used:
            raise InvalidRequest(
                _NO_INPUT.format(input=missing, field=field),
                param=field,
                code="lora_not_supported" if field == "lora_task_id" else "unsupported_parameter",
            )


def refuse_guide(asked: Asked | None) -> None:
    """Structured output and forced tool calls need guided decoding, which NVIDIA's model does
    not take per request."""
    if asked is None:
        return
    raise InvalidRequest(
        (
            "'",
            asked.param,
            "' needs guided decoding, and NVIDIA's llmapi Triton model reads no "
            "guided-decoding input (helpers.py get_sampling_params_from_request): send "
            "tool_choice 'auto' or no output format, or serve the model on the engine path, whose "
            "tensorrt_llm model takes guided_decoding_guide_type",
        ),
        param=asked.param,
        code="unsupported_parameter",
    )


def refuse_forced_tool_choice(request: ChatCompletionRequest) -> None:
    """``required`` or a named function: forcing a call needs guided decoding (said before
    any other tool problem: no family or template could make it work here)."""
    choice: object = request.tool_choice
    param = "tool_choice"
    if choice is None:
        choice, param = request.function_call, "function_call"
    if choice is not None and (choice == "required" or not isinstance(choice, str)):
        refuse_guide(Asked(Guide("json"), (param,)))


def refuse_media_kinds(media: Sequence[MediaPart]) -> None:
    for part in media:
        if part.kind != "image":
            raise InvalidRequest(
                (
                    "NVIDIA's llmapi Triton model takes images only (its image_url input); "
                    f"{part.kind} input cannot be sent (",
                    part.where,
                    ")",
                ),
                param=part.where,
                code="unsupported_content_part",
            )


def check_prompt_tokens(tokens: int, served: ServedRuntime, param: str = "messages") -> None:
    """A prompt over the engine's ``max_input_len`` (``max_input_tokens``), counted exactly."""
    limit = served.config.max_input_tokens
    if limit is not None and tokens > limit:
        raise InvalidRequest(
            f"the prompt is {tokens} tokens; model '{served.config.id}' accepts at most {limit}",
            param=param,
            code="context_length_exceeded",
        )
