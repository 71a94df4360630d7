"""The Triton side of the relay: one interface, one implementation per kind of call.

The relay (``pipeline/relay.py``) never asks which kind of call it runs: it starts the
``CallRun`` its ``Prepared`` names (``Prepared.runner``, chosen when the plan is made), reads
its text ``pieces()``, and asks it for the ``outcome`` at the end. Three kinds run here:

- ``TextRun``: one call on TensorRT-LLM's engine text contract (``GenerationRequest``), read
  straight from its stream (the token hot path: no task, no queue);
- ``NamedRun`` (``_named_calls.py``): a family's own calls (``NamedCall``s, speech), run in
  tasks, at most ``concurrency`` at once, their text relayed in call order;
- ``LlmapiRun`` (``_llmapi_call.py``): one call on NVIDIA's ``llmapi`` Triton model
  (``LlmapiRequest``), whose streamed text is cumulative.

Closing a run cancels every call still open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from gateway.families.calls import FinishReason, GenerationRequest, Outcome, TokenLogprob
from gateway.observability.record import RequestRecord
from gateway.pipeline._watchdog import SilenceWatch, as_timeout
from gateway.protocol.common import UsageCounts
from gateway.streaming.text import CumulativeToDelta
from gateway.triton.backend import Route
from gateway.triton.outputs import text_response, token_scores

if TYPE_CHECKING:
    from gateway.pipeline.relay import Prepared


class CallRun(Protocol):
    """One request's Triton calls in flight, and what they have produced so far."""

    tokens: int  # tokens relayed so far (max_tokens over a plan, usage, the silence watch)
    capped: bool  # the plan's own token cap ended it
    scored: list[TokenLogprob]  # tokens with log probs not yet taken (when asked for)
    watch: SilenceWatch | None

    def pieces(self) -> AsyncGenerator[str, None]:
        """The text, in order, as it comes."""
        ...

    def outcome(self, stopped: bool) -> Outcome:
        """How the run ended (``stopped``: a stop string cut it), once ``pieces`` is done."""
        ...

    def failed(self) -> None:
        """A call failed: forget what the failure may have invalidated."""
        ...

    async def aclose(self) -> None: ...


# Starts the run of a prepared request: ``runner(prepared, request_id, record)``.
Runner = Callable[["Prepared", str, RequestRecord], CallRun]


class RunBase:
    """What every kind of run keeps: the request, its streams, the counts so far."""

    def __init__(self, prepared: Prepared, request_id: str, record: RequestRecord) -> None:
        self.prepared = prepared
        self.watch: SilenceWatch | None = None
        self.request_id = request_id
        self.record = record
        self.tokens = 0
        self.capped = False
        self.scored: list[TokenLogprob] = []
        self._streams: list[AsyncGenerator[Any, None]] = []

    def _timed_out(self, cancel: asyncio.CancelledError) -> BaseException:
        """What a cancellation of this run stands for: the silence watch's timeout when it
        fired, else the cancellation itself."""
        timeout = as_timeout(self.watch)
        return cancel if timeout is None else timeout

    def failed(self) -> None:
        """A failed call: a LoRA adapter sent by id alone may have been evicted."""
        lora = self.prepared.lora
        if lora is not None and lora.weights is None:
            self.prepared.served.lora.forget(lora.task_id)  # send the weights next time

    async def aclose(self) -> None:
        for stream in self._streams:
            await stream.aclose()


class TextRun(RunBase):
    """One call on the engine's text contract: Triton's ``text_output`` pieces, its counters."""

    def __init__(self, prepared: Prepared, request_id: str, record: RequestRecord) -> None:
        super().__init__(prepared, request_id, record)
        call = prepared.plan.calls[0]
        assert isinstance(call, GenerationRequest)  # runner chosen for this kind (relay.prepared)
        self.call = call
        self.counters: dict[str, int] = {}

    def pieces(self) -> AsyncGenerator[str, None]:
        return self._text_call()

    async def _text_call(self) -> AsyncGenerator[str, None]:
        served, lora = self.prepared.served, self.prepared.lora
        to_delta = CumulativeToDelta() if served.config.streaming == "cumulative" else None
        route = Route(self.prepared.route_key)
        stream = served.client.stream(
            served.config.triton_model, self.prepared.inputs, self.request_id, route=route
        )
        self._streams.append(stream)
        counters, record, asked = self.counters, self.record, self.prepared.logprobs
        try:
            async for raw in stream:
                if lora is not None and lora.weights is not None:
                    served.lora.delivered_ok(lora.task_id)  # the server has the adapter now
                response = text_response(raw)
                counters.update(response.counters)
                text = to_delta(response.text) if to_delta else response.text
                token = response.has_output and not response.final
                if token:
                    self.tokens += 1
                    record.on_token()
                if asked is not None and (token or (response.has_output and text)):
                    self.scored.append(asked.token(text, *token_scores(raw)))
                if text:
                    yield text
        except asyncio.CancelledError as cancel:
            raise self._timed_out(cancel) from None
        finally:
            record.replica = route.replica

    def outcome(self, stopped: bool) -> Outcome:
        counters = self.counters
        completion = counters.get("num_output_tokens", self.tokens)
        capped = not stopped and completion >= self.call.max_tokens
        finish: FinishReason = "length" if capped else "stop"
        cached = None
        reused_blocks = counters.get("kv_cache_reused_blocks")
        block = self.prepared.served.tokens_per_block
        if reused_blocks is not None and block:
            cached = reused_blocks * block
        prompt = counters.get("num_input_tokens", 0)
        usage = UsageCounts(prompt, completion, cached, media=self.prepared.media_tokens)
        return Outcome(finish, usage)
