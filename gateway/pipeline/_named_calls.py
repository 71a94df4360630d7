"""A family's own calls (``NamedCall``s: speech), run in tasks and relayed in call order.

``NamedCall``s run in tasks, at most ``concurrency`` at once, each feeding a queue; ``pieces``
drains the queues in call order, so the second call's text waits for the first to finish while
the calls themselves overlap. A failure is queued as the exception, so the reader always wakes
up. A plan with ``probe_then`` first runs its one probe call, whose output decides the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from gateway.families.calls import FinishReason, NamedCall, Outcome, OutputReader, Plan
from gateway.observability.record import RequestRecord
from gateway.pipeline._calls import RunBase
from gateway.protocol.common import UsageCounts
from gateway.streaming.text import StrippedDeltas
from gateway.triton.outputs import output_arrays
from gateway.triton.tensors import named_inputs

if TYPE_CHECKING:
    from gateway.pipeline.relay import Prepared

_END = object()


class NamedRun(RunBase):
    """The plan's ``NamedCall``s in flight and the outputs their readers closed with."""

    def __init__(self, prepared: Prepared, request_id: str, record: RequestRecord) -> None:
        super().__init__(prepared, request_id, record)
        self.plan: Plan = prepared.plan
        self.outputs: list[Any] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def pieces(self) -> AsyncGenerator[str, None]:
        try:
            if self.plan.probe_then is not None:
                probe = self.plan.calls[0]
                assert isinstance(probe, NamedCall)  # a probe plan is of named calls
                value = await self._probe(probe)
                self.plan = await asyncio.to_thread(self.plan.probe_then, value)
            async with contextlib.aclosing(self._named_calls()) as pieces:
                async for piece in pieces:
                    yield piece
        except asyncio.CancelledError as cancel:
            raise self._timed_out(cancel) from None

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

    def outcome(self, stopped: bool) -> Outcome:
        plan = self.plan
        transcript = plan.finish(self.outputs) if plan.finish is not None else None
        finish: FinishReason = "length" if self.capped and not stopped else "stop"
        if transcript is None:
            return Outcome(finish, UsageCounts(0, self.tokens))
        # Capped: the calls that ran ahead wrote tokens nobody receives; count what was relayed.
        completion = self.tokens if self.capped else transcript.completion_tokens
        usage = UsageCounts(transcript.prompt_tokens, completion)
        return Outcome(finish, usage, transcript)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await super().aclose()
