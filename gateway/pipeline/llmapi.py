"""A chat (or completion) request on NVIDIA's ``llmapi`` Triton model: what it can carry.

NVIDIA's model (TensorRT-LLM triton_backend/all_models/llmapi/tensorrt_llm, 1/helpers.py
@0df60f9ad779c4dc4f55da07e08b969fc4684e56) takes ``text_input`` as the finished prompt for text,
so the gateway renders the conversation with the model's own chat template
(``families/chat_template.py``): system message, every turn, tool calls and results, the tools
where the template takes them, and the template's thinking switch from ``reasoning_effort``.

With images it builds the prompt itself (``tensorrt_llm.inputs.async_build_multimodal_prompt``,
added by NVIDIA/TensorRT-LLM#18381; its TensorRT-LLM 1.2.1 stand-in in NVIDIA's Qwen2.5-VL guide,
triton-inference-server/tutorials Popular_Models_Guide/Qwen2.5-VL/trtllm_121_compat.py, shows
the steps): ONE user message whose content is the images' placeholders followed by
``text_input``, the template applied with the generation prompt and nothing else (no system
message, no earlier turns, no tools, no template switches). So an image request must be one
user message; its text parts are joined with newlines and go after the images, which is where
the model's template puts them (as vLLM does for templates that take string content). Anything
else with images is refused, naming why; nothing is dropped.

Everything else the model does not read (guided decoding, log probabilities, repetition
penalty, min_tokens, ignore_eos, LoRA by task id, video, audio) is a 400 naming the field and
what is missing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.errors import InvalidRequest
from gateway.families.base import Conversation
from gateway.families.calls import LlmapiRequest, Plan, Sampling
from gateway.families.chat_template import THINKING_SWITCHES
from gateway.families.llmapi import IMAGE_URLS, LlmapiModel
from gateway.pipeline._llmapi_call import LlmapiRun
from gateway.pipeline.admission import admit
from gateway.pipeline.conversation import MediaPart, ParsedChat
from gateway.pipeline.generation import TextFields, check_total_prompt, fresh_seed, max_tokens
from gateway.pipeline.llmapi_refusals import (
    check_prompt_tokens,
    refuse_fields,
    refuse_forced_tool_choice,
    refuse_guide,
    refuse_media_kinds,
)
from gateway.pipeline.media import prepare_media
from gateway.pipeline.reasoning import ReasoningOutput, reasoning_output
from gateway.pipeline.relay import Prepared
from gateway.pipeline.structured.guides import requested_guide
from gateway.pipeline.structured.request import requested_output
from gateway.pipeline.structured.tools import ToolPlan, tool_plan
from gateway.protocol.chat import ChatCompletionRequest
from gateway.protocol.completions import CompletionRequest
from gateway.served import ServedRuntime
from gateway.services import Media
from gateway.triton.contract import ModelContract
from gateway.triton.llmapi import llmapi_inputs
from gateway.triton.replicas.keys import prompt_key

# Why each refused field cannot be honoured on this contract.
_IMAGES_ONE_MESSAGE = (
    "NVIDIA's llmapi Triton model builds an image prompt from one user message "
    "(async_build_multimodal_prompt: the images, then text_input, in the model's chat "
    "template): {what} cannot be sent with images"
)


@dataclass(frozen=True)
class LlmapiPrompt:
    """What a request sends as ``text_input`` and how many tokens it is."""

    text_input: str
    prompt_tokens: int
    images: tuple[MediaPart, ...] = ()


def reasoning_effort(request: ChatCompletionRequest) -> str | None:
    """``reasoning_effort`` (an OpenAI field; read from the body's extra fields while the
    protocol type does not name it)."""
    value = getattr(request, "reasoning_effort", None)
    if value is None:
        value = (request.model_extra or {}).get("reasoning_effort")
    return value if isinstance(value, str) else None


def thinking(llmapi: LlmapiModel, effort: str | None) -> dict[str, Any]:
    """The template's thinking switch set from ``reasoning_effort``; a 400 when the template
    has none. ``none``/``minimal`` switch thinking off, any other effort on."""
    if effort is None:
        return {}
    switch = llmapi.template.thinking_switch
    if switch is None:
        raise InvalidRequest(
            "reasoning_effort cannot be honoured: this model's chat template has no thinking "
            f"switch (it reads none of {', '.join(THINKING_SWITCHES)})",
            param="reasoning_effort",
            code="unsupported_parameter",
        )
    if switch == "reasoning_effort":
        return {switch: effort}
    return {switch: effort not in ("none", "minimal")}


def messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation as Hugging Face chat messages (tool-call arguments as objects, as
    templates render them)."""
    out: list[dict[str, Any]] = []
    if conversation.system is not None:
        out.append({"role": "system", "content": conversation.system})
    for turn in conversation.turns:
        message: dict[str, Any] = {"role": turn.role, "content": turn.text}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.loads(call.arguments)},
                }
                for call in turn.tool_calls
            ]
        if turn.tool_call_id is not None:
            message["tool_call_id"] = turn.tool_call_id
        out.append(message)
    return out


def check_markers(llmapi: LlmapiModel, conversation: Conversation) -> None:
    """Message text may not hold the tokenizer's special tokens: NVIDIA's model tokenizes
    ``text_input`` with them parsed, so such text could forge turns or image slots."""
    texts = [conversation.system or ""] + [t.text for t in conversation.turns]
    texts += [c.name + c.arguments for t in conversation.turns for c in t.tool_calls]
    for marker in llmapi.special_tokens:
        if any(marker in text for text in texts):
            raise InvalidRequest(
                f"message text may not contain the special token {marker!r}",
                param="messages",
                code="reserved_marker",
            )


def image_prompt(parsed: ParsedChat, tools: ToolPlan | None, effort: str | None) -> str:
    """The user text an image request sends; a 400 naming what cannot go with images."""
    conversation = parsed.conversation
    what = None
    if conversation.system is not None:
        what = "a system message"
    elif len(conversation.turns) != 1:
        what = "earlier turns"
    elif tools is not None and tools.rendered:
        what = "tools"
    elif effort is not None:
        what = "reasoning_effort (the template's switches)"
    if what is not None:
        param = "reasoning_effort" if what.startswith("reasoning") else "messages"
        if what == "tools":
            param = "tools"
        raise InvalidRequest(
            _IMAGES_ONE_MESSAGE.format(what=what), param=param, code="unsupported_content_part"
        )
    return conversation.turns[0].text


def count_image_prompt(llmapi: LlmapiModel, text: str, images: int, max_chars: int) -> int:
    """The tokens of the prompt the model builds for an image request, as far as the gateway
    can know them: its chat template over one user message of the images and the text (the
    default system prompt, the turn markers, one placeholder per image), counted with its
    tokenizer. What an image placeholder expands to is the model's processor's business and
    is not counted here. A template that does not take list content: the text alone."""
    content = [{"type": "image"}] * images + [{"type": "text", "text": text}]
    try:
        rendered = llmapi.template.render([{"role": "user", "content": content}], max_chars)
    except InvalidRequest:
        return llmapi.count(text, special=True)
    return llmapi.count(llmapi.prompt(rendered), special=True)


def render_text(
    llmapi: LlmapiModel,
    parsed: ParsedChat,
    tools: ToolPlan | None,
    extra: dict[str, Any],
    max_chars: int,
) -> LlmapiPrompt:
    """The finished prompt and its token count (runs in a thread: the template is sandboxed
    and capped, but its loops and the tokenizer still cost time)."""
    specs = [tool.openai() for tool in tools.rendered] if tools is not None else []
    if specs and not llmapi.template.reads("tools"):
        raise InvalidRequest(
            "this model's chat template does not take tools (it reads no 'tools' variable): "
            "tools cannot be offered to it",
            param="tools",
            code="unsupported_parameter",
        )
    rendered = llmapi.template.render(messages(parsed.conversation), max_chars, specs, extra)
    text_input = llmapi.prompt(rendered)
    return LlmapiPrompt(text_input, llmapi.count(text_input, special=True))


async def prepare_llmapi_chat(
    request: ChatCompletionRequest,
    media: Media,
    served: ServedRuntime,
    contract: ModelContract,
    parsed: ParsedChat,
) -> list[Prepared]:
    """Check, fetch the images, render, and build one call per choice (``n``)."""
    llmapi = served.llmapi
    assert llmapi is not None  # the caller routes llmapi models here
    refuse_fields(request, bool(request.logprobs), request.lora_task_id)
    refuse_forced_tool_choice(request)
    tools = tool_plan(request, served.family)
    refuse_guide(requested_output(request, tools))
    refuse_media_kinds(parsed.media)
    admit(served.capabilities, parsed.media, media.settings)
    check_markers(llmapi, parsed.conversation)
    effort = reasoning_effort(request)
    limits = served.policy
    if parsed.media:
        text = image_prompt(parsed, tools, effort)
        args = (llmapi, text, len(parsed.media), limits.max_prompt_chars)
        prompt = LlmapiPrompt(
            text, await asyncio.to_thread(count_image_prompt, *args), parsed.media
        )
    else:
        extra = thinking(llmapi, effort)
        cap = limits.max_prompt_chars
        prompt = await asyncio.to_thread(render_text, llmapi, parsed, tools, extra, cap)
    check_total_prompt(
        [len(prompt.text_input)], request.n, limits.max_total_prompt_chars, "messages"
    )
    check_prompt_tokens(prompt.prompt_tokens, served)
    parser = tools.parser(served.family, request.stream) if tools is not None else None
    param = "max_completion_tokens" if request.max_completion_tokens else "max_tokens"
    stops = tuple(dict.fromkeys([*request.stop_list, *served.family.stop_strings]))
    calls = await _calls(request, media, served, prompt, (request.requested_max_tokens, param))
    reasoning = await reasoning_output(served)  # the output side: <think> split off the answer
    return [
        _prepared(served, contract, c, stops, len(parsed.media), key, parser, reasoning)
        for c, key in calls
    ]


async def prepare_llmapi_completion(
    request: CompletionRequest,
    served: ServedRuntime,
    contract: ModelContract,
    prompts: Sequence[str],
) -> list[Prepared]:
    """Each prompt as ``text_input`` as it is (a completion has no chat template), ``n``
    choices each; choice ``i * n + j`` is prompt ``i``'s ``j``-th, as OpenAI numbers them."""
    llmapi = served.llmapi
    assert llmapi is not None  # the caller routes llmapi models here
    refuse_fields(request, request.logprobs is not None, None)
    refuse_guide(requested_guide(request.response_format, request.model_extra))
    counts = await asyncio.to_thread(lambda: [llmapi.count(p, special=True) for p in prompts])
    stops = tuple(dict.fromkeys([*request.stop_list, *served.family.stop_strings]))
    prepared = []
    for prompt, tokens in zip(prompts, counts, strict=True):
        check_prompt_tokens(tokens, served, "prompt")
        calls = await _calls(
            request,
            None,
            served,
            LlmapiPrompt(prompt, tokens),
            (request.max_tokens, "max_tokens"),
        )
        prepared += [_prepared(served, contract, c, stops, 0, k, None) for c, k in calls]
    return prepared


async def _calls(
    request: TextFields,
    media: Media | None,
    served: ServedRuntime,
    prompt: LlmapiPrompt,
    requested: tuple[int | None, str],
    best_of: int | None = None,
) -> list[tuple[LlmapiRequest, int | None]]:
    """One call per choice, each with a seed of its own, and its affinity key. ``media``
    fetches the prompt's images (a request with none: None)."""
    urls: tuple[str, ...] = ()
    extra_id = None
    if prompt.images:
        assert media is not None  # a chat request's images come with its media service
        images = await prepare_media(prompt.images, replace(served, family=IMAGE_URLS), media)
        assert images is not None and images.tensor is not None  # images were asked for
        urls = tuple(url.decode("ascii") for url in images.tensor[1])
        extra_id = images.extra_id
    limit = max_tokens(*requested, served)
    stops = tuple(getattr(request, "stop_list", None) or ())
    key = prompt_key(extra_id, prompt.text_input, served.tokens_per_block)
    calls = []
    for choice in range(getattr(request, "n", 1)):
        sampling = Sampling(
            request.temperature, request.top_p, request.top_k, fresh_seed(request, choice)
        )
        call = LlmapiRequest(
            text_input=prompt.text_input,
            max_tokens=limit,
            prompt_tokens=prompt.prompt_tokens,
            stream=request.stream,
            sampling=sampling,
            presence_penalty=request.presence_penalty,
            frequency_penalty=request.frequency_penalty,
            best_of=best_of,
            stop=stops,
            image_urls=urls,
        )
        calls.append((call, key))
    return calls


def _prepared(
    served: ServedRuntime,
    contract: ModelContract,
    call: LlmapiRequest,
    stops: tuple[str, ...],
    media_items: int,
    key: int | None,
    parser: Any,
    reasoning: ReasoningOutput | None = None,
) -> Prepared:
    """The call's tensors, built while a problem with them is still a 400."""
    if call.stream and not contract.decoupled:
        call = replace(call, stream=False)  # one response; the SSE writer still streams it
    inputs = llmapi_inputs(call, contract, served.config.id)
    return Prepared(
        served, contract, Plan((call,)), stops, media_items, None, inputs,
        served.policy.timeouts, None, key, tool_parser=parser,
        reasoning=reasoning, runner=LlmapiRun,
    )  # fmt: skip
