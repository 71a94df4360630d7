"""One Responses API request, on the chat skeleton: refuse -> rebuild the conversation ->
a chat request -> ``prepare_chat`` -> relay -> store.

A Responses request is translated into the chat pipeline's ``ChatCompletionRequest``
(``instructions`` as the system message, a continued conversation's inputs and outputs, then
the new input; ``text.format`` as ``response_format``; function ``tools`` and ``tool_choice`` in
chat's shape), so media, families, KV-cache ids, guided decoding and tool calling are chat's,
not copies. What chat refuses it refuses here, with the Responses field's name
(``max_output_tokens``, ``input[2].content[1]``). Parameters with no chat counterpart that the
gateway cannot honour (``background``, hosted tools, ``conversation``...) are refused here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gateway.errors import InvalidRequest, NotFound, echoed
from gateway.families.events import Done, Relay
from gateway.pipeline.chat import prepare_chat
from gateway.pipeline.generation import VLLM_EXTENSIONS
from gateway.pipeline.relay import Prepared
from gateway.pipeline.responses_input import ChatMessages, normalise, to_chat
from gateway.pipeline.responses_names import ResponsesNames
from gateway.protocol.chat import ChatCompletionRequest
from gateway.protocol.invalid import invalid_request
from gateway.protocol.responses import FunctionTool, ResponsesRequest
from gateway.served import Models, ServedRuntime
from gateway.services import Preparation
from gateway.store import ResponseStore, StoredResponse
from gateway.streaming.response_events import ResponseBuilder

# include values: the input images' URLs are always listed; the others need what is not here.
LOGPROBS = "message.output_text.logprobs"
INCLUDABLE = frozenset({"message.input_image.image_url", LOGPROBS})
# Chat's (and vLLM's) generation fields the Responses API lacks: handed to chat, which honours
# or refuses each by name (top_k, stop, a LoRA adapter, frame sampling...).
CHAT_EXTRAS = frozenset(
    {"top_k", "min_tokens", "repetition_penalty", "ignore_eos", "presence_penalty",
     "frequency_penalty", "stop", "logit_bias", "lora_task_id", "media_io_kwargs",
     *VLLM_EXTENSIONS}
)  # fmt: skip
# Chat's spellings of what the Responses API names otherwise: refused, naming the right one.
# OpenAI answers a prewarm with no output; TensorRT-LLM's KV reuse fills its cache only by
# running a request, and a gateway that generated anyway would bill and store an answer the
# client said it did not want.
PREWARM_REFUSED = (
    "preparing a prompt without generating output (prompt_cache_options.prewarm, "
    "generate: false) is not supported: send the request itself; its prompt prefix is kept in "
    "the engine's KV cache and reused by the next request that shares it"
)
MISSPELT = {
    "messages": "use input",
    "max_tokens": "use max_output_tokens",
    "max_completion_tokens": "use max_output_tokens",
    "response_format": "use text.format",
    "n": "a response is one answer",
}


@dataclass
class ResponseJob:
    """A Responses request made ready for the chat pipeline."""

    request: ResponsesRequest
    scope: str  # whose responses (the API key's digest; "" without keys)
    input_items: list[dict[str, Any]]  # this request's own input, as stored and listed
    chat: ChatCompletionRequest
    names: ResponsesNames  # chat's field names as this request named them
    builder: ResponseBuilder
    conversation_id: str | None = None  # its input and output are appended there


def refuse_unsupported(request: ResponsesRequest) -> None:
    """Responses parameters the gateway cannot honour: a 400 naming each, never a drop."""
    reasoning = request.reasoning
    refusals = {
        "background": ("a background response must be stored: send store: true",
                       bool(request.background) and not request.store),
        "conversation": ("conversation and previous_response_id cannot be used together",
                         request.conversation is not None
                         and request.previous_response_id is not None),
        "truncation": ("truncation 'auto' is not supported: a conversation longer than the "
                       "model's context is refused", request.truncation == "auto"),
        "reasoning.summary": ("reasoning summaries are not supported: a reasoning model's "
                              "reasoning comes whole, as a reasoning item's reasoning_text "
                              "content", reasoning is not None and reasoning.summary is not None),
        "prompt": ("prompt templates are not supported", request.prompt is not None),
        "max_tool_calls": ("max_tool_calls is not supported", request.max_tool_calls is not None),
        "text.verbosity": ("text.verbosity is not supported",
                           request.text is not None and request.text.verbosity is not None),
        "prompt_cache_options.prewarm": (PREWARM_REFUSED, bool(
            request.prompt_cache_options and request.prompt_cache_options.prewarm)),
        "generate": (PREWARM_REFUSED, request.generate is False),
    }  # fmt: skip
    for param, (message, refused) in refusals.items():
        if refused:
            raise InvalidRequest(message, param=param, code="unsupported_parameter")
    conversation_id(request)
    for index, value in enumerate(request.include or ()):
        if value not in INCLUDABLE:
            raise InvalidRequest(
                f"include value {value!r} is not supported", param=f"include[{index}]",
                code="unsupported_parameter",
            )  # fmt: skip
    if request.input is None and request.previous_response_id is None and not request.conversation:
        raise InvalidRequest("input is required", param="input")
    for name, hint in MISSPELT.items():
        if name in (request.model_extra or {}):
            raise InvalidRequest(
                f"'{name}' is not a Responses API field: {hint}", param=name,
                code="unsupported_parameter",
            )  # fmt: skip


def conversation_id(request: ResponsesRequest) -> str | None:
    """The ``conversation`` the request continues: an id, or ``{"id": ...}``."""
    given = request.conversation
    if isinstance(given, dict):
        given = given.get("id")
        if not isinstance(given, str):
            raise InvalidRequest('conversation must be an id or {"id": ...}', param="conversation")
    if given is not None and not 1 <= len(given) <= 256:
        raise InvalidRequest("conversation must be a conversation id", param="conversation")
    return given


def for_counting(request: ResponsesRequest) -> ResponsesRequest:
    """``POST /v1/responses/input_tokens``'s body as the create it counts: not stored, not
    streamed, one output token (only the prefill's count is wanted)."""
    return request.model_copy(update={"store": False, "stream": False, "max_output_tokens": 1})


def chat_extras(request: ResponsesRequest) -> dict[str, Any]:
    """The chat generation fields this request carries, for chat to honour or refuse."""
    return {k: v for k, v in (request.model_extra or {}).items() if k in CHAT_EXTRAS}


def chat_logprobs(request: ResponsesRequest) -> dict[str, Any]:
    """Token log probabilities are returned when ``include`` asks for them, with
    ``top_logprobs`` alternatives each (OpenAI's rule); chat computes them."""
    if LOGPROBS not in (request.include or ()):
        return {}
    return {"logprobs": True, "top_logprobs": request.top_logprobs or 0}


def chat_tools(request: ResponsesRequest) -> dict[str, Any]:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` in chat's shape."""
    fields: dict[str, Any] = {}
    tools = []
    for index, raw in enumerate(request.tools or ()):
        where = f"tools[{index}]"
        if raw.get("type") != "function":
            raise InvalidRequest(
                f"tools of type {raw.get('type')!r} are not supported: hosted tools (web search, "
                "file search, code interpreter, computer...) are OpenAI's; only function tools "
                "are served", param=f"{where}.type", code="unsupported_parameter",
            )  # fmt: skip
        try:
            tool = FunctionTool.model_validate(raw)
        except ValidationError as exc:
            raise invalid_request(exc, ("tools", index)) from None
        tools.append(
            {"type": "function", "function": tool.model_dump(exclude={"type"}, exclude_none=True)}
        )
    if tools:
        fields["tools"] = tools
    choice = request.tool_choice
    if isinstance(choice, dict):
        if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
            raise InvalidRequest(
                "tool_choice must be 'none', 'auto', 'required' or a function "
                '{"type": "function", "name": ...}', param="tool_choice",
                code="unsupported_parameter",
            )  # fmt: skip
        choice = {"type": "function", "function": {"name": choice["name"]}}
    elif choice not in (None, "none", "auto", "required"):
        raise InvalidRequest(f"tool_choice {choice!r} is not supported", param="tool_choice")
    if choice not in (None, "none", "auto") and not tools:
        raise InvalidRequest("tool_choice needs function tools", param="tool_choice")
    if choice is not None and tools:
        fields["tool_choice"] = choice
    if request.parallel_tool_calls is not None and tools:
        fields["parallel_tool_calls"] = request.parallel_tool_calls
    return fields


def response_format(request: ResponsesRequest) -> dict[str, Any] | None:
    """``text.format`` as chat's ``response_format``."""
    form = request.text.format if request.text is not None else None
    if form is None or form.type == "text":
        return None
    if form.type == "json_object":
        return {"type": "json_object"}
    schema = dict(form.model_extra or {})
    return {"type": "json_schema", "json_schema": schema}


def effort(request: ResponsesRequest) -> str | None:
    """``reasoning.effort``: chat's ``reasoning_effort``, honoured or refused per model
    (pipeline/reasoning.checked_effort)."""
    return request.reasoning.effort if request.reasoning is not None else None


def echo(request: ResponsesRequest) -> dict[str, Any]:
    """The request's fields the response object repeats."""
    text = request.text.model_dump(exclude_none=True) if request.text is not None else {}
    return {
        "model": request.model,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": None,
        "metadata": request.metadata or {},
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": request.previous_response_id,
        "background": bool(request.background),
        "conversation": {"id": conversation_id(request)} if request.conversation else None,
        "reasoning": {"effort": effort(request), "summary": None},
        "service_tier": "default",
        "store": request.store,
        "temperature": request.temperature,
        "text": {"format": {"type": "text"}, **text},
        "tool_choice": request.tool_choice or "auto",
        "tools": request.tools or [],
        "top_logprobs": request.top_logprobs or 0,
        "top_p": request.top_p,
        "truncation": "disabled",
        "user": request.user,
    }


async def draft_response(
    request: ResponsesRequest,
    models: Models,
    store: ResponseStore,
    max_stored_bytes: int,
    scope: str,
    builder: ResponseBuilder,
    names: ResponsesNames | None = None,
) -> ResponseJob:
    """Refusals, the conversation rebuilt, the chat request: all before any media work.
    ``names`` (the route's, which writes its errors with them) learns where each chat message
    came from; ``max_stored_bytes``: [responses]."""
    refuse_unsupported(request)
    models.model(request.model)  # 404 for an unknown model before the store is read
    items = normalise(request.input) if request.input is not None else []
    names = names if names is not None else ResponsesNames()
    messages = ChatMessages(origins=names.origins)
    if request.instructions:
        messages.add({"role": "system", "content": request.instructions}, ("instructions",))
    if request.previous_response_id is not None:
        chain = await store.chain(request.previous_response_id, scope)
        if not chain or chain[0].previous_id is not None:
            raise InvalidRequest(
                f"previous response {echoed(request.previous_response_id)} was not found, or a "
                "response it continued is gone",
                param="previous_response_id", code="previous_response_not_found",
            )  # fmt: skip
        to_chat(conversation(chain), messages, ("previous_response_id",))
    continued = conversation_id(request)
    if continued is not None:
        earlier = await store.conversation_items(continued, scope)
        if earlier is None:
            raise NotFound(
                f"No conversation with id {echoed(continued)} was found", param="conversation"
            )
        to_chat(earlier, messages, ("conversation",))
    to_chat(items, messages, None)
    fields = {
        "model": request.model, "messages": messages.messages, "stream": request.stream,
        "max_completion_tokens": request.max_output_tokens, "temperature": request.temperature,
        "top_p": request.top_p, "seed": request.seed, "user": request.user,
        "response_format": response_format(request), **chat_tools(request),
        **chat_extras(request), **chat_logprobs(request), "reasoning_effort": effort(request),
    }  # fmt: skip
    names.speaking_chat = True  # what is refused from here on is refused in chat's names
    try:
        chat = ChatCompletionRequest.model_validate(fields)
    except ValidationError as exc:  # in chat's names: ``names`` says them as this request does
        raise invalid_request(exc) from None
    job = ResponseJob(request, scope, items, chat, names, builder, continued)
    if request.store or continued:  # what could not be stored is refused before any work
        size = check_stored_size(job, max_stored_bytes)
        await store.check_room(scope, size)
    return job


def conversation(chain: list[StoredResponse]) -> list[dict[str, Any]]:
    """The items of a stored conversation, oldest first: each response's input, then its
    output (what ``input_items`` lists, and what a continuation replays)."""
    items: list[dict[str, Any]] = []
    for earlier in chain:
        items += earlier.input_items
        items += earlier.response["output"]
    return items


def check_stored_size(job: ResponseJob, limit: int) -> int:
    """The input's size as stored, refused over ``limit``."""
    size = len(json.dumps(job.input_items, separators=(",", ":")))
    if size > limit:
        raise InvalidRequest(
            f"this input is {size} bytes as stored; stored responses may hold at most {limit} "
            "(send store: false, or raise [responses] max_stored_bytes)",
            param="store", code="request_too_large",
        )  # fmt: skip
    return size


async def prepare_response(
    job: ResponseJob, served: ServedRuntime, services: Preparation
) -> list[Prepared]:
    """``prepare_chat``: its refusals name chat's fields, which ``job.names`` renames when
    the route writes the error."""
    return await prepare_chat(job.chat, served, services)


async def append_turn(job: ResponseJob, final: dict[str, Any], store: ResponseStore) -> None:
    """The request's input and the response's output, appended to its conversation."""
    assert job.conversation_id is not None
    turn = [*job.input_items, *final["output"]]
    if not await store.add_items(job.conversation_id, job.scope, turn):
        raise NotFound(
            f"conversation '{job.conversation_id}' was deleted while this response was "
            "generated", param="conversation",
        )  # fmt: skip


async def stored(events: Relay, job: ResponseJob, store: ResponseStore) -> Relay:
    """The relay's events, each added to the response first; at the end the response is
    stored (when asked) before its ``Done`` goes on, so it can be read or continued as soon as
    the client has it."""
    builder = job.builder
    try:
        async for event in events:
            if isinstance(event, Done):
                final = builder.finish(event.outcome)
                if job.request.store:  # a background run leaves a cancel as it is
                    await store.put(
                        StoredResponse(builder.id, job.scope, time.time(),
                                       job.request.previous_response_id, final, job.input_items),
                        keep_cancelled=bool(job.request.background),
                    )  # fmt: skip
                if job.conversation_id is not None:
                    await append_turn(job, final, store)
            else:
                builder.add(event)
            yield event
    finally:
        await events.aclose()
