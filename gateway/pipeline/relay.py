"""Run any ``Plan`` against Triton: text pieces in order, then one ``Outcome``.

Every endpoint ends here. The relay is plain stages over whatever kind of call the plan makes
(pieces -> stop strings -> log probabilities -> outcome): the kind is chosen once, when the
request is prepared (``Prepared.runner``, a ``pipeline/_calls.CallRun``), and the relay never
asks it. Stop strings and ``max_tokens`` apply to whatever the plan produces. Leaving early
(a stop string matched, the caller went away) closes the Triton streams, which cancels the
requests upstream. ``record`` (observability) hears of each token, the usage, an error or an
early exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gateway.errors import GatewayError, InvalidRequest, shutdown_of
from gateway.families.base import SpeechOptions
from gateway.families.calls import GenerationRequest, Plan
from gateway.families.events import Done, Relay, TextDelta, text_delta
from gateway.families.tool_formats.base import ToolParser
from gateway.observability.record import RequestRecord
from gateway.pipeline import _calls
from gateway.pipeline._named_calls import NamedRun
from gateway.pipeline._watchdog import SilenceWatch, Timeouts
from gateway.pipeline.logprobs import LogprobsAsked, ScoredText
from gateway.pipeline.lora import LoraChoice
from gateway.pipeline.reasoning import ReasoningOutput
from gateway.protocol.common import MediaTokens
from gateway.served import ServedRuntime
from gateway.streaming.text import StopMatcher
from gateway.triton.contract import ModelContract
from gateway.triton.replicas.keys import routing_key
from gateway.triton.tensors import build_inputs


@dataclass(frozen=True)
class Prepared:
    """Everything decided before the first byte of the response."""

    served: ServedRuntime
    contract: ModelContract
    plan: Plan
    stops: tuple[str, ...] = ()
    media_items: int = 0
    lora: LoraChoice | None = None
    # The tensors of a text-contract plan, built while the request could still get a 400.
    inputs: Sequence[Any] = field(default_factory=tuple)
    timeouts: Timeouts | None = None  # None: wait on Triton for as long as it takes
    logprobs: LogprobsAsked | None = None  # asked for: the relay yields ``Scored`` pieces
    # Where a set of Triton replicas sends the call (triton/replicas/keys.py); None: anywhere.
    route_key: int | None = None
    # Makes the choice's tool-call parser (``pipeline/structured``); None: content as it is.
    tool_parser: Callable[[], ToolParser] | None = None
    # A reasoning model's split of its text (``pipeline/reasoning``); None: all answer.
    reasoning: ReasoningOutput | None = None
    # Starts the run of this kind of call (``pipeline/_calls.py``): the relay never asks which.
    runner: _calls.Runner = _calls.TextRun
    # The prompt tokens that are media features, by modality (usage's prompt_tokens_details).
    media_tokens: MediaTokens | None = None


@dataclass(frozen=True)
class Extras:
    """What a chat choice adds to its ``Prepared`` beyond the call itself."""

    tool_parser: Callable[[], ToolParser] | None = None
    reasoning: ReasoningOutput | None = None
    media_tokens: MediaTokens | None = None


NO_EXTRAS = Extras()


def prepared(
    served: ServedRuntime,
    contract: ModelContract,
    plan: Plan,
    stops: tuple[str, ...] = (),
    media_items: int = 0,
    lora: LoraChoice | None = None,
    timeouts: Timeouts | None = None,
    logprobs: LogprobsAsked | None = None,
    extras: Extras = NO_EXTRAS,
) -> Prepared:
    """The last step before the first byte: the text call's tensors, built while a problem
    with them (an image tensor the deployment cannot take) can still be a 400."""
    first = plan.calls[0]
    if logprobs is not None:
        if not isinstance(first, GenerationRequest):
            raise InvalidRequest(
                f"model '{served.config.id}' does not report log probabilities",
                param="logprobs",
                code="unsupported_parameter",
            )
        flags = (*first.extra_flags, *logprobs.flags)
        plan = replace(plan, calls=(replace(first, extra_flags=flags), *plan.calls[1:]))
        first = plan.calls[0]
    parser, reasoning, tokens = extras.tool_parser, extras.reasoning, extras.media_tokens
    if not isinstance(first, GenerationRequest):  # a family's own calls (speech)
        return Prepared(
            served, contract, plan, stops, media_items, lora, (), timeouts, logprobs,
            tool_parser=parser, reasoning=reasoning, runner=NamedRun, media_tokens=tokens,
        )  # fmt: skip
    inputs, key = build_inputs(first, contract), routing_key(first, served.tokens_per_block)
    return Prepared(
        served, contract, plan, stops, media_items, lora, inputs, timeouts, logprobs, key,
        tool_parser=parser, reasoning=reasoning, media_tokens=tokens,
    )  # fmt: skip


async def family_plan(
    served: ServedRuntime,
    draft: GenerationRequest,
    audio: np.ndarray[Any, Any] | None = None,
    speech: SpeechOptions | None = None,
) -> Plan:
    """The family's plan; off the event loop when there is audio to window and featurise."""
    if audio is None:
        return served.family.plan(draft, None, speech)
    return await asyncio.to_thread(served.family.plan, draft, audio, speech)


async def relay(prepared: Prepared, request_id: str, record: RequestRecord | None = None) -> Relay:
    """``TextDelta``s as Triton produces them (with their tokens when log probabilities were
    asked for), then one ``Done``. The graceful stop's cancellation comes out as
    ``ShuttingDown``, so the endpoint ends its stream with its own failure events."""
    record = record or RequestRecord(request_id, "", "")
    stop = StopMatcher(prepared.stops)
    watch = None
    run = prepared.runner(prepared, request_id, record)
    if prepared.timeouts is not None:
        watch = run.watch = SilenceWatch(prepared.timeouts, lambda: run.tokens)
    pieces = run.pieces()  # an async generator: closed below, which closes its Triton call
    finished = False
    unlisten = None
    if watch is not None:
        watch.start()
        unlisten = prepared.served.on_lost(watch.lost)  # a Triton that hangs ends it at once
    scored = ScoredText() if prepared.logprobs is not None else None
    try:
        try:
            async for piece in pieces:
                emitted = stop.feed(piece)
                if scored is not None:
                    if item := _scored(scored, run, emitted):
                        yield item
                elif emitted:
                    yield text_delta(emitted)
                if stop.stopped or run.capped:
                    break
            await pieces.aclose()
            await run.aclose()
        except asyncio.CancelledError as cancel:
            shutdown = shutdown_of(cancel)
            if shutdown is None:
                raise
            raise shutdown from None
        tail = stop.flush()
        if scored is not None:
            if item := _scored(scored, run, tail, last=True):
                yield item
        elif tail:
            yield text_delta(tail)
        outcome = run.outcome(stop.stopped)
        record.set_usage(outcome.usage, outcome.finish_reason)
        finished = True
        yield Done(outcome)
    except GatewayError as exc:
        record.error_code = exc.code
        run.failed()
        raise
    except (GeneratorExit, asyncio.CancelledError):
        record.cancelled = not finished  # closed after the outcome is the normal end
        raise
    finally:
        if watch is not None:
            watch.stop()
        if unlisten is not None:
            unlisten()
        await pieces.aclose()
        await run.aclose()  # a no-op once closed; cancels the Triton requests otherwise


def _scored(
    scored: ScoredText, run: _calls.CallRun, text: str, last: bool = False
) -> TextDelta | None:
    """``text`` with the tokens it lets out (those the run has read are handed over first);
    None when there is neither."""
    for token in run.scored:
        scored.add(token)
    run.scored.clear()
    piece = scored.end(text) if last else scored.emit(text)
    return TextDelta(piece.text, 0, piece.tokens) if piece else None
