"""One chat completion, for any family: check -> media -> render -> plan -> tensors.

``prepare_chat`` does everything that can fail because of the request before any byte of the
response is sent (those failures keep their 4xx status); ``relay.relay`` then runs the plan. The
family decides what the request becomes: a vision-language family renders the prompt around its
server-side template and sends one call on the text contract; a speech family transcribes the
request's audio clip. Nothing here asks which family it is.
"""

from __future__ import annotations

import secrets
import time

from gateway.errors import InvalidRequest
from gateway.families.calls import GenerationRequest, Sampling
from gateway.pipeline._watchdog import Timeouts
from gateway.pipeline.conversation import parse_messages
from gateway.pipeline.lora import LoraChoice, lora_choice
from gateway.pipeline.media import PreparedMedia, prepare_media
from gateway.pipeline.relay import Prepared, family_plan, prepared
from gateway.protocol.chat import ChatCompletionRequest
from gateway.runtime import Runtime, ServedRuntime


def refuse_unsupported(request: ChatCompletionRequest) -> None:
    """OpenAI parameters the engine cannot honour: a 400 naming them, never a silent drop."""
    refusals = {
        "n": ("only n=1 is supported", request.n != 1),
        "tools": ("tool calling is not supported by this gateway", bool(request.tools)),
        "functions": ("function calling is not supported", bool(request.functions)),
        "logprobs": ("logprobs are not supported", bool(request.logprobs)),
        "top_logprobs": ("logprobs are not supported", bool(request.top_logprobs)),
        "logit_bias": ("logit_bias is not supported", bool(request.logit_bias)),
        "modalities": (
            "only text output is supported",
            any(m != "text" for m in request.modalities or ()),
        ),
        "audio": ("spoken output is not supported", request.audio is not None),
    }
    for param, (message, refused) in refusals.items():
        if refused:
            raise InvalidRequest(message, param=param, code="unsupported_parameter")
    if request.stream_options is not None and not request.stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )
    refuse_extensions(request)
    if request.response_format and request.response_format.type != "text":
        raise InvalidRequest(
            "only response_format type 'text' is supported",
            param="response_format",
            code="unsupported_parameter",
        )


# No tokenizer in use covers more than this many characters with one token, so a prompt longer
# than this many characters per allowed token cannot fit whatever the tokenizer.
CHARS_PER_TOKEN_BOUND = 32


def check_prompt_size(text: str, served: ServedRuntime, max_chars: int) -> None:
    """Refuse a prompt that cannot fit before Triton spends seconds tokenising it."""
    if served.config.max_input_tokens is not None:
        max_chars = min(max_chars, served.config.max_input_tokens * CHARS_PER_TOKEN_BOUND)
    if len(text) > max_chars:
        raise InvalidRequest(
            f"the prompt is {len(text)} characters long; model '{served.config.id}' accepts "
            f"at most {max_chars}",
            param="messages",
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
    "guided_json": None,
    "guided_regex": None,
    "guided_choice": None,
    "guided_grammar": None,
    "structured_outputs": None,
    "priority": None,
    "return_tokens_as_token_ids": None,
}


def refuse_extensions(request: ChatCompletionRequest) -> None:
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


def max_tokens(requested: int | None, param: str, served: ServedRuntime, cap: int) -> int:
    """The request's max_tokens within the server's cap; the model's default when absent."""
    if requested is not None and requested > cap:
        raise InvalidRequest(
            f"{param} is {requested}; this gateway allows at most {cap}", param=param
        )
    return requested or min(served.config.default_max_tokens, cap)


def end_ids(served: ServedRuntime) -> tuple[int | None, int | None]:
    """(end_id, pad_id) to send: configured, else the family's; ``"server"`` sends none."""
    configured = served.config.end_id
    family = served.family
    end_id = None if configured == "server" else configured or family.default_end_id
    pad_id = served.config.pad_id if served.config.pad_id is not None else family.default_pad_id
    return (end_id if isinstance(end_id, int) else None), pad_id


async def prepare_chat(request: ChatCompletionRequest, runtime: Runtime) -> Prepared:
    """Validate, fetch and preprocess media, render the prompt and plan every call."""
    served = runtime.model(request.model)
    refuse_unsupported(request)
    parsed = parse_messages(request.messages)
    family = served.family
    family.check_text(parsed.conversation)
    family.check_conversation(parsed.conversation)
    text_input = family.render(parsed.conversation)
    check_prompt_size(text_input, served, runtime.settings.generation.max_prompt_chars)
    contract = await served.get_contract()
    media_started = time.perf_counter()
    media = await prepare_media(parsed.media, served, runtime, request.media_io_kwargs)
    if media:
        runtime.metrics.media_prepared(served.config.id, time.perf_counter() - media_started)
        if media.extra_id is not None and family.supports_extra_id:
            runtime.metrics.kv_reuse_id_sent(served.config.id)
    lora = await lora_choice(served.config, served.lora, request.lora_task_id)
    stops = tuple(dict.fromkeys([*request.stop_list, *family.stop_strings]))
    draft = _draft(request, served, runtime, contract.decoupled, text_input, media, stops, lora)
    audio = media.samples if media is not None else None
    plan = await family_plan(served, draft, audio)
    timeouts = Timeouts.of(runtime.settings.upstream)
    return prepared(served, contract, plan, stops, len(parsed.media), lora, timeouts)


def _seed(request: ChatCompletionRequest) -> int | None:
    """The request's seed, else a fresh one: TensorRT-LLM seeds every request 0 by default,
    so two identical sampled requests would otherwise give the same text."""
    if request.seed is not None:
        return request.seed
    if request.temperature == 0:
        return None  # greedy: the seed changes nothing
    return secrets.randbits(63)


def _draft(
    request: ChatCompletionRequest,
    served: ServedRuntime,
    runtime: Runtime,
    stream: bool,
    text_input: str,
    media: PreparedMedia | None,
    stops: tuple[str, ...],
    lora: LoraChoice | None,
) -> GenerationRequest:
    """The request's inputs in neutral names; ``build_inputs`` sends what the model declares."""
    family = served.family
    end_id, pad_id = end_ids(served)
    if request.ignore_eos:
        end_id = -1  # TensorRT-LLM: never stop at the end-of-sequence token
    param = "max_completion_tokens" if request.max_completion_tokens else "max_tokens"
    images = media.tensor if media is not None and media.samples is None else None
    return GenerationRequest(
        text_input=text_input,
        max_tokens=max_tokens(
            request.requested_max_tokens, param, served, runtime.settings.generation.max_tokens
        ),
        stream=stream,
        sampling=Sampling(request.temperature, request.top_p, request.top_k, _seed(request)),
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
        stop_words=stops,
        lora_task_id=lora.task_id if lora else None,
        lora_weights=lora.weights if lora else None,
        lora_config=lora.config if lora else None,
    )
