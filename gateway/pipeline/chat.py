"""One chat completion: model -> media -> family -> Triton -> deltas and an outcome.

``prepare_chat`` does everything that can fail because of the request (before any byte of
the response is sent, so those failures keep their 4xx status); ``relay`` turns Triton's
responses into text deltas and ends with an ``Outcome`` (finish reason and usage). The
stream loop only relays: formatting belongs to ``streaming/``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from gateway.errors import GatewayError, InvalidRequest
from gateway.observability.record import RequestRecord
from gateway.pipeline.conversation import parse_messages
from gateway.pipeline.lora import LoraChoice, lora_choice
from gateway.pipeline.media import PreparedMedia, prepare_media
from gateway.pipeline.transcribe import (
    PreparedTranscription,
    chat_transcript,
    prepare_chat_transcription,
)
from gateway.protocol.chat import ChatCompletionRequest
from gateway.runtime import Runtime, ServedRuntime
from gateway.streaming.chunks import UsageCounts
from gateway.streaming.text import CumulativeToDelta, StopMatcher
from gateway.triton.contract import ModelContract
from gateway.triton.responses import text_response
from gateway.triton.tensors import GenerationRequest, build_inputs


@dataclass(frozen=True)
class PreparedChat:
    served: ServedRuntime
    contract: ModelContract
    generation: GenerationRequest
    stops: tuple[str, ...]
    media_items: int = 0
    lora: LoraChoice | None = None


@dataclass(frozen=True)
class Outcome:
    finish_reason: str
    usage: UsageCounts


def _refuse_unsupported(request: ChatCompletionRequest) -> None:
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
    if request.response_format and request.response_format.type != "text":
        raise InvalidRequest(
            "only response_format type 'text' is supported",
            param="response_format",
            code="unsupported_parameter",
        )


def _max_tokens(request: ChatCompletionRequest, served: ServedRuntime, cap: int) -> int:
    requested = request.requested_max_tokens
    if requested is not None and requested > cap:
        raise InvalidRequest(
            f"max_tokens is {requested}; this gateway allows at most {cap}",
            param="max_completion_tokens" if request.max_completion_tokens else "max_tokens",
        )
    return requested or min(served.config.default_max_tokens, cap)


def _sampling(request: ChatCompletionRequest) -> dict[str, float | int | None]:
    """OpenAI sampling -> TRT-LLM's. TRT-LLM treats top_k=0 with top_p=0 as greedy."""
    temperature = 1.0 if request.temperature is None else request.temperature
    if temperature == 0.0:
        return {"temperature": 0.0, "top_k": 1, "top_p": 0.0}
    top_p = 1.0 if request.top_p is None else request.top_p
    return {"temperature": temperature, "top_k": request.top_k or 0, "top_p": top_p}


def _end_id(served: ServedRuntime) -> int | None:
    configured = served.config.end_id
    if configured == "server":
        return None
    return configured if configured is not None else served.family.default_end_id


async def prepare_chat(
    request: ChatCompletionRequest, runtime: Runtime
) -> PreparedChat | PreparedTranscription:
    """Validate, fetch and preprocess media, render the prompt and pick every input."""
    served = runtime.model(request.model)
    _refuse_unsupported(request)
    if served.config.family == "whisper":  # a speech model answers with the transcript
        return await prepare_chat_transcription(request, served, runtime)
    parsed = parse_messages(request.messages)
    family = served.family
    family.check_text(parsed.conversation)
    family.check_conversation(parsed.conversation)
    text_input = family.render(parsed.conversation)
    contract = await served.get_contract()
    media_started = time.perf_counter()
    images = await prepare_media(parsed.media, served, runtime, request.media_io_kwargs)
    if images:
        runtime.metrics.media_prepared(served.config.id, time.perf_counter() - media_started)
        if images.extra_id is not None and family.supports_extra_id:
            runtime.metrics.kv_reuse_id_sent(served.config.id)
    lora = await lora_choice(served.config, served.lora, request.lora_task_id)
    stops = tuple(dict.fromkeys([*request.stop_list, *family.stop_strings]))
    generation = _generation(
        request, served, runtime, contract.decoupled, text_input, images, stops, lora
    )
    return PreparedChat(served, contract, generation, stops, len(parsed.media), lora)


def _generation(
    request: ChatCompletionRequest,
    served: ServedRuntime,
    runtime: Runtime,
    stream: bool,
    text_input: str,
    media: PreparedMedia | None,
    stops: tuple[str, ...] = (),
    lora: LoraChoice | None = None,
) -> GenerationRequest:
    """The request's inputs in neutral names; ``build_inputs`` sends what the model declares."""
    family = served.family
    return GenerationRequest(
        text_input=text_input,
        max_tokens=_max_tokens(request, served, runtime.settings.limits.max_tokens_cap),
        stream=stream,
        seed=request.seed,
        min_tokens=request.min_tokens,
        end_id=_end_id(served),
        pad_id=served.config.pad_id if served.config.pad_id is not None else family.default_pad_id,
        presence_penalty=request.presence_penalty,
        frequency_penalty=request.frequency_penalty,
        repetition_penalty=request.repetition_penalty,
        # Families whose preprocessing keys its own vision positions (qwen2_vl) get no id.
        prompt_table_extra_id=media.extra_id if media and family.supports_extra_id else None,
        images=(media.tensor_name, media.tensor) if media else None,
        image_sizes=media.image_sizes if media else None,
        decoder_text_input=family.decoder_prompt,
        stop_words=stops,
        lora_task_id=lora.task_id if lora else None,
        lora_weights=lora.weights if lora else None,
        lora_config=lora.config if lora else None,
        **_sampling(request),  # type: ignore[arg-type]
    )


async def relay(
    prepared: PreparedChat | PreparedTranscription,
    request_id: str,
    record: RequestRecord | None = None,
) -> AsyncIterator[str | Outcome]:
    """Text deltas as Triton produces them, then one ``Outcome``.

    Leaving early (a stop string matched, the caller went away) closes the Triton stream,
    which cancels the request upstream. ``request_id`` becomes Triton's request id.
    ``record`` (observability) hears of each token, the usage, an error or an early exit.
    """
    if isinstance(prepared, PreparedTranscription):
        async for item in chat_transcript(prepared, request_id, record):
            yield item if isinstance(item, str) else Outcome("stop", item)
        return
    record = record or RequestRecord(request_id, "", "")
    served = prepared.served
    inputs = build_inputs(prepared.generation, prepared.contract)
    stop = StopMatcher(prepared.stops)
    to_delta = CumulativeToDelta() if served.config.streaming == "cumulative" else None
    steps = 0
    counters: dict[str, int] = {}
    finished = False
    stream = served.client.stream(served.config.triton_model, inputs, request_id)
    lora = prepared.lora
    try:
        async for raw in stream:
            response = text_response(raw)
            if lora is not None and lora.weights is not None:
                served.lora.delivered_ok(lora.task_id)  # the server has the adapter now
            counters.update(response.counters)
            if response.has_output and not response.final:
                steps += 1
                record.on_token()
            text = to_delta(response.text) if to_delta else response.text
            emitted = stop.feed(text)
            if emitted:
                yield emitted
            if stop.stopped:
                break
        await stream.aclose()
        tail = stop.flush()
        if tail:
            yield tail
        outcome = _outcome(prepared, steps, counters, stop.stopped)
        record.set_usage(outcome.usage, outcome.finish_reason)
        finished = True
        yield outcome
    except GatewayError as exc:
        record.error_code = exc.code
        if lora is not None and lora.weights is None:
            served.lora.forget(lora.task_id)  # evicted, or restarted: send weights next time
        raise
    except (GeneratorExit, asyncio.CancelledError):
        record.cancelled = not finished  # closed after the outcome is the normal end
        raise
    finally:
        await stream.aclose()  # a no-op once closed; cancels the Triton request otherwise


def _outcome(
    prepared: PreparedChat, steps: int, counters: dict[str, int], stopped: bool
) -> Outcome:
    completion = counters.get("num_output_tokens", steps)
    max_tokens = prepared.generation.max_tokens
    finish = "length" if not stopped and completion >= max_tokens else "stop"
    cached = None
    reused_blocks = counters.get("kv_cache_reused_blocks")
    block = prepared.served.tokens_per_block
    if reused_blocks is not None and block:
        cached = reused_blocks * block
    usage = UsageCounts(
        prompt_tokens=counters.get("num_input_tokens", 0),
        completion_tokens=completion,
        cached_tokens=cached,
    )
    return Outcome(finish, usage)
