"""One chat completion, for any family: check -> media -> render -> plan -> tensors.

``prepare_chat`` does everything that can fail because of the request before any byte of the
response is sent (those failures keep their 4xx status); ``relay.relay`` then runs the plan. The
family decides what the request becomes: a vision-language family renders the prompt around its
server-side template and sends one call on the text contract; a speech family transcribes the
request's audio clip. Nothing here asks which family it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from gateway.errors import InvalidRequest
from gateway.observability.tracing import phase
from gateway.pipeline.admission import admit
from gateway.pipeline.conversation import MediaPart, parse_messages
from gateway.pipeline.documents import expand_documents
from gateway.pipeline.generation import check_prompt_size, check_total_prompt, draft, refuse
from gateway.pipeline.llmapi import prepare_llmapi_chat
from gateway.pipeline.logprobs import logprobs_asked
from gateway.pipeline.lora import choose_adapter, lora_choice
from gateway.pipeline.media import PreparedMedia, prepare_media
from gateway.pipeline.reasoning import check_guide as check_reasoning_guide
from gateway.pipeline.reasoning import checked_effort, reasoning_output
from gateway.pipeline.relay import Extras, Prepared, family_plan, prepared
from gateway.pipeline.structured.guides import check_guide
from gateway.pipeline.structured.request import lowered, requested_output
from gateway.pipeline.structured.tools import tool_plan
from gateway.protocol.chat import ChatCompletionRequest, MediaIOKwargs
from gateway.served import ServedRuntime
from gateway.services import Media, Preparation

log = logging.getLogger(__name__)


def refuse_unsupported(request: ChatCompletionRequest) -> None:
    """OpenAI parameters the engine cannot honour: a 400 naming them, never a silent drop."""
    refusals = {
        "logit_bias": ("logit_bias is not supported", bool(request.logit_bias)),
        "modalities": (
            "only text output is supported",
            any(m != "text" for m in request.modalities or ()),
        ),
        "audio": ("spoken output is not supported", request.audio is not None),
    }
    refuse(request, refusals)
    if request.top_logprobs is not None and not request.logprobs:
        raise InvalidRequest("top_logprobs needs logprobs set to true", param="top_logprobs")


async def _media(
    parts: Sequence[MediaPart], served: ServedRuntime, media: Media, options: MediaIOKwargs | None
) -> PreparedMedia | None:
    """The request's media prepared, timed and counted (the KV-reuse ids it sends)."""
    started = time.perf_counter()
    prepared_media = await prepare_media(parts, served, media, options)
    if prepared_media:
        phase("media.prepare", started, items=len(parts))
        media.metrics.media_prepared(served.config.id, time.perf_counter() - started)
        if prepared_media.extra_id is not None and served.family.supports_extra_id:
            media.metrics.kv_reuse_id_sent(served.config.id)
    return prepared_media


async def prepare_chat(
    request: ChatCompletionRequest, served: ServedRuntime, services: Preparation
) -> list[Prepared]:
    """Validate, fetch and preprocess media, render the prompt and plan every call: one
    ``Prepared`` per choice (``n``), sharing the media (and so its KV-cache id)."""
    refuse_unsupported(request)
    # PDF pages become images.
    documents = await expand_documents(request, served, services.documents)
    request = documents.request
    parsed = parse_messages(request.messages, documents.origins)
    contract = await served.get_contract()
    family = served.family  # as bound to the contract just read
    if served.llmapi is not None:  # NVIDIA's llmapi model: the chat template is rendered here
        return await prepare_llmapi_chat(request, services.media, served, contract, parsed)
    tools = tool_plan(request, family)
    asked = requested_output(request, tools)
    reasoning = await reasoning_output(served)
    check_reasoning_guide(asked, reasoning)
    # The effort a rendering with a reasoning switch reads (a chat template's enable_thinking).
    effort = checked_effort(request.reasoning_effort, served)
    guide = None
    if asked is not None:  # before the tools are rendered into the prompt: a hostile schema
        suspects = tools.suspects() if tools is not None else []  # costs no more than this
        guide = await check_guide(asked, contract, served.config.id, services.guides, suspects)
    family.check_text(parsed.conversation)
    conversation = lowered(parsed.conversation, family, tools)
    adapter = choose_adapter(served.config, request.lora_task_id)
    admit(
        served.capabilities, parsed.media, services.media.settings,
        conversation=conversation, rules=family.conversation_rules, lora=adapter is not None,
    )  # fmt: skip
    text_input = family.render(conversation)
    if served.policy.log_prompts:  # the debug switch: prompts are private
        fields = {"model": served.config.id, "prompt": text_input}
        log.info("rendered prompt", extra={"fields": fields})
    check_prompt_size(text_input, served)
    limit = served.policy.max_total_prompt_chars
    check_total_prompt([len(text_input)], request.n, limit, "messages")
    parser = tools.parser(family, request.stream) if tools is not None else None
    if parser is not None and request.logprobs:
        raise InvalidRequest(
            "logprobs cannot be combined with tools (their calls are parsed out of the text "
            "the log probabilities describe); send tool_choice 'none' or drop logprobs",
            param="logprobs",
            code="unsupported_parameter",
        )
    top = (request.top_logprobs or 0) if request.logprobs else None
    logprobs = await logprobs_asked(served, contract, top, "logprobs")
    media = await _media(parsed.media, served, services.media, request.media_io_kwargs)
    lora = await lora_choice(served.config, served.lora, request.lora_task_id)
    stops = tuple(dict.fromkeys([*request.stop_list, *family.stop_strings]))
    param = "max_completion_tokens" if request.max_completion_tokens else "max_tokens"
    requested = (request.requested_max_tokens, param)
    audio = media.samples if media is not None else None
    timeouts = served.policy.timeouts
    planning = time.perf_counter()
    choices = []
    tokens = media.tokens if media is not None else None
    extras = Extras(tool_parser=parser, reasoning=reasoning, media_tokens=tokens)  # every choice's
    for choice in range(request.n):
        generation = draft(
            request, served, contract.decoupled, text_input, requested, media, stops,
            lora, choice, guide, effort,
        )  # fmt: skip
        plan = await family_plan(served, generation, audio)
        ready = prepared(
            served, contract, plan, stops, len(parsed.media), lora, timeouts, logprobs, extras
        )  # fmt: skip
        choices.append(ready)
    phase("chat.plan", planning)  # the calls' tensors (the image's copied into its input)
    return choices
