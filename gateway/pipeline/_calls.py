"""The Triton side of the relay: one streaming call per planned call, read in order.

A text-contract call is read straight from its stream (the token hot path: no task, no
queue). ``NamedCall``s run in tasks, at most ``concurrency`` at once, each feeding a queue;
``pieces`` drains the queues in call order, so the second call's text waits for the first to
finish while the calls themselves overlap. A failure is queued as the exception, so the reader
always wakes up. Closing the run cancels every call still open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError
from gateway.families.calls import (
    GenerationRequest,
    NamedCall,
    OutputReader,
    Plan,
    TokenLogprob,
)
from gateway.observability.record import RequestRecord
from gateway.pipeline._watchdog import SilenceWatch, as_timeout
from gateway.streaming.text import CumulativeToDelta, StrippedDeltas
from gateway.triton.backend import Route
from gateway.triton.outputs import output_arrays, text_response, token_scores
from gateway.triton.tensors import named_inputs

if TYPE_CHECKING:
    from gateway.pipeline.relay import Prepared

_END = object()


class Run:
    """One request's calls in flight, and what they have produced so far."""

    def __init__(
        self,
        prepared: Prepared,
        request_id: str,
        record: RequestRecord,
        watch: SilenceWatch | None = None,
    ) -> None:
        self.prepared = prepared
        self.watch = watch
        self.plan: Plan = prepared.plan
        self.request_id = request_id
        self.record = record
        self.tokens = 0
        self.counters: dict[str, int] = {}
        self.outputs: list[Any] = []
        self.scored: list[TokenLogprob] = []  # tokens with log probs not yet taken (asked for)
        self.capped = False
        self._streams: list[AsyncGenerator[Any, None]] = []
        self._tasks: list[asyncio.Task[None]] = []

    def pieces(self) -> AsyncGenerator[str, None]:
        """The text of the plan's calls, in order (a text call's generator itself: one async
        generator per token on the hot path, not two)."""
        first = self.plan.calls[0]
        if isinstance(first, GenerationRequest):
            return self._text_call(first)
        return self._named_pieces()

    def _silence(self) -> GatewayError | None:
        return as_timeout(self.watch)

    async def _named_pieces(self) -> AsyncGenerator[str, None]:
        try:
            if self.plan.probe_then is not None:
                probe = self.plan.calls[0]
                assert isinstance(probe, NamedCall)
                value = await self._probe(probe)
                self.plan = await asyncio.to_thread(self.plan.probe_then, value)
            async with contextlib.aclosing(self._named_calls()) as pieces:
                async for piece in pieces:
                    yield piece
        except asyncio.CancelledError:
            timeout = self._silence()
            if timeout is None:
                raise
            raise timeout from None

    async def _text_call(self, call: GenerationRequest) -> AsyncGenerator[str, None]:
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
        except asyncio.CancelledError:
            timeout = self._silence()
            if timeout is None:
                raise
            raise timeout from None
        finally:
            record.replica = route.replica

    def _open(self, call: NamedCall) -> AsyncGenerator[Any, None]:
        served = self.prepared.served
        inputs = named_inputs(call, self.prepared.contract)
        return served.client.stream(
            served.config.triton_model, inputs, self.request_id + call.suffix, call.outputs
        )

    async def _probe(self, call: NamedCall) -> Any:
        reader = call.reader()
        stream = self._open(call)
        self._streams.append(stream)
        async for raw in stream:
            reader.feed(output_arrays(raw, call.outputs))
        return reader.close()

    async def _named_calls(self) -> AsyncGenerator[str, None]:
        calls = [c for c in self.plan.calls if isinstance(c, NamedCall)]
        readers = [call.reader() for call in calls]
        queues: list[asyncio.Queue[Any]] = [asyncio.Queue() for _ in calls]
        slots = asyncio.Semaphore(self.plan.concurrency)
        self._tasks = [
            asyncio.ensure_future(self._pump(call, reader, queue, slots))
            for call, reader, queue in zip(calls, readers, queues, strict=True)
        ]
        cap, joiner = self.plan.max_tokens, self.plan.join_calls
        deltas = StrippedDeltas(joiner) if joiner is not None else None
        for reader, queue in zip(readers, queues, strict=True):
            if deltas is not None:
                deltas.separate()
            while (item := await queue.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                piece, tokens = item
                self.tokens += tokens
                self.record.on_token()
                if deltas is not None:
                    piece = deltas.feed(piece)
                if piece:
                    yield piece
                if cap is not None and self.tokens >= cap:
                    self.capped = True
                    self.outputs.append(reader.close())
                    return
            self.outputs.append(reader.close())

    async def _pump(
        self,
        call: NamedCall,
        reader: OutputReader,
        queue: asyncio.Queue[Any],
        slots: asyncio.Semaphore,
    ) -> None:
        stream: AsyncGenerator[Any, None] | None = None
        try:
            async with slots:
                stream = self._open(call)
                async for raw in stream:
                    before = reader.tokens
                    piece = reader.feed(output_arrays(raw, call.outputs))
                    if reader.tokens != before or piece:
                        await queue.put((piece, reader.tokens - before))
            await queue.put(_END)
        except Exception as exc:
            await queue.put(exc)
        finally:
            if stream is not None:
                await stream.aclose()

    def failed(self) -> None:
        """A failed call: a LoRA adapter sent by id alone may have been evicted."""
        lora = self.prepared.lora
        if lora is not None and lora.weights is None:
            self.prepared.served.lora.forget(lora.task_id)  # send the weights next time

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        for stream in self._streams:
            await stream.aclose()


def run(
    prepared: Prepared, request_id: str, record: RequestRecord, watch: SilenceWatch | None
) -> Run:
    return Run(prepared, request_id, record, watch)
