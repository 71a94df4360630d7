"""One call on NVIDIA's ``llmapi`` Triton model, relayed as text pieces.

Streamed, the model sends the whole text so far on every response (NVIDIA's model.py writes
``output.text`` of the LLM API's ``RequestOutput``), so each is turned into the new piece; the
last one is flagged final and carries ``finish_reason`` / ``stop_reason`` (asked for with
``return_finish_reason`` / ``return_stop_reason``) and, with ``return_perf_metrics``, the
KV-cache blocks reused. The model reports no token counts: the prompt was counted by the
gateway when it was rendered, the completion is counted here with the model's tokenizer.
Closing the run closes the gRPC stream, which cancels the request in Triton; NVIDIA's model
checks for cancelled requests every ``cancellation_check_period_ms`` (100 by default) and aborts
them in the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from gateway.errors import UpstreamFailed
from gateway.families.calls import FinishReason, LlmapiRequest, Outcome
from gateway.observability.record import RequestRecord
from gateway.pipeline._calls import RunBase
from gateway.protocol.common import UsageCounts
from gateway.streaming.text import CumulativeToDelta
from gateway.triton.backend import Route
from gateway.triton.llmapi import llmapi_response

if TYPE_CHECKING:
    from gateway.pipeline.relay import Prepared


class LlmapiRun(RunBase):
    """The call's pieces, its finish reason, its text (for the completion's token count)."""

    def __init__(self, prepared: Prepared, request_id: str, record: RequestRecord) -> None:
        super().__init__(prepared, request_id, record)
        call = prepared.plan.calls[0]
        assert isinstance(call, LlmapiRequest)  # runner chosen for this kind (pipeline/llmapi)
        self.call = call
        self.finish_reason: str | None = None
        self.reused_blocks: int | None = None
        self._text: list[str] = []

    def pieces(self) -> AsyncGenerator[str, None]:
        return self._call()

    async def _call(self) -> AsyncGenerator[str, None]:
        served = self.prepared.served
        route = Route(self.prepared.route_key)
        stream = served.client.stream(
            served.config.triton_model, self.prepared.inputs, self.request_id, route=route
        )
        self._streams.append(stream)
        to_delta = CumulativeToDelta() if self.call.stream else None
        record, text = self.record, self._text
        try:
            async for raw in stream:
                response = llmapi_response(raw)
                piece = to_delta(response.text) if to_delta else response.text
                if response.finish_reason is not None:
                    self.finish_reason = response.finish_reason
                if response.reused_blocks is not None:
                    self.reused_blocks = response.reused_blocks
                if piece:
                    self.tokens += 1  # a response per engine step: a token, or a few
                    record.on_token()
                    text.append(piece)
                    yield piece
        except asyncio.CancelledError as cancel:
            raise self._timed_out(cancel) from None
        finally:
            record.replica = route.replica
        if self.finish_reason in ("timeout", "cancelled"):
            raise UpstreamFailed(
                f"the llmapi model ended the request early (finish_reason {self.finish_reason!r})"
            )

    def outcome(self, stopped: bool) -> Outcome:
        llmapi = self.prepared.served.llmapi
        generated = "".join(self._text)
        completion = llmapi.count(generated) if llmapi is not None else self.tokens
        length = self.finish_reason == "length" or (
            self.finish_reason is None and completion >= self.call.max_tokens
        )
        finish: FinishReason = "length" if length and not stopped else "stop"
        prompt, cached = self.call.prompt_tokens, None
        block = self.prepared.served.tokens_per_block
        if self.reused_blocks is not None and block:
            cached = self.reused_blocks * block
            if self.call.image_urls:  # the image tokens the model added are not in the count
                prompt = max(prompt, cached)
            cached = min(cached, prompt)
        return Outcome(finish, UsageCounts(prompt, completion, cached))
