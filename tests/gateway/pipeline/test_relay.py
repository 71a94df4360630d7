"""relay(): Triton's request id is the HTTP request id; the record hears tokens, usage,
errors and early exits (for metrics and the access log)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from gateway.config import ServedModel
from gateway.errors import UpstreamFailed
from gateway.families.calls import GenerationRequest, Plan
from gateway.families.events import Done, TextDelta
from gateway.families.registry import get_family
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.record import RequestRecord
from gateway.pipeline.relay import Prepared, relay
from gateway.pipeline.relay import prepared as prepare
from gateway.runtime import ServedRuntime
from gateway.triton.contract import parse_model_config
from tests.fakes.triton_wire import infer_response


class FakeClient:
    """Streams canned responses and remembers what it was asked and whether it was closed."""

    url = "fake:1"

    def __init__(self, texts: list[str], fail_after: int | None = None) -> None:
        self.texts = texts
        self.fail_after = fail_after
        self.request_ids: list[str] = []
        self.closed = False

    async def stream(
        self, model: str, inputs: list, request_id: str, outputs: tuple = (), route: Any = None
    ) -> AsyncIterator:
        self.request_ids.append(request_id)
        try:
            for index, text in enumerate(self.texts):
                if self.fail_after is not None and index == self.fail_after:
                    raise UpstreamFailed("the inference server failed: boom")
                yield infer_response(
                    text_output=np.array([[text.encode()]], dtype=np.object_),
                    num_input_tokens=np.array([[7]], np.int32),
                    num_output_tokens=np.array([[index + 1]], np.int32),
                )
        finally:
            self.closed = True


def prepared(client: FakeClient, max_tokens: int = 16) -> Prepared:
    config = ServedModel(id="m", family="llava", triton_model="t", triton_url="fake:1")
    contract = parse_model_config(
        {
            "name": "t",
            "input": [
                {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
                {"name": "max_tokens", "data_type": "TYPE_INT32", "dims": [1]},
            ],
        }
    )
    served = ServedRuntime(config, get_family("llava"), client)  # type: ignore[arg-type]
    return prepare(served, contract, Plan((GenerationRequest("hi", max_tokens),)))


def bound_record(metrics: GatewayMetrics) -> RequestRecord:
    record = RequestRecord("req-1", "POST", "/v1/chat/completions", metrics=metrics)
    record.set_model("m", served=True)
    return record


async def test_request_id_reaches_triton_and_usage_reaches_the_record() -> None:
    client = FakeClient(["a", "b", "c"])
    metrics = GatewayMetrics()
    record = bound_record(metrics)
    items = [item async for item in relay(prepared(client), "req-1", record)]
    assert client.request_ids == ["req-1"]
    assert items[:3] == [TextDelta("a"), TextDelta("b"), TextDelta("c")]
    assert isinstance(items[-1], Done)
    assert record.tokens_streamed == 3 and record.completion_tokens == 3
    assert record.prompt_tokens == 7 and record.finish_reason == "stop"
    assert not record.cancelled and record.error_code is None
    gaps = metrics.registry.get_sample_value("mmgw_inter_token_seconds_count", {"model": "m"})
    assert gaps == 2  # three tokens, two gaps
    assert record.first_token_at is not None


async def test_leaving_early_cancels_upstream_and_marks_the_record() -> None:
    client = FakeClient(["a"] * 100)
    record = bound_record(GatewayMetrics())
    events = relay(prepared(client, max_tokens=100), "req-2", record)
    assert await anext(events) == TextDelta("a")
    await events.aclose()
    assert client.closed and record.cancelled


async def test_normal_end_is_not_a_cancellation() -> None:
    client = FakeClient(["a"])
    record = bound_record(GatewayMetrics())
    events = relay(prepared(client), "req-3", record)
    async for item in events:
        if isinstance(item, Done):
            break  # as stream_events does: stop reading once the outcome is in
    await events.aclose()
    assert not record.cancelled


async def test_an_upstream_error_is_recorded_with_its_code() -> None:
    client = FakeClient(["a", "b"], fail_after=1)
    record = bound_record(GatewayMetrics())
    with pytest.raises(UpstreamFailed):
        _ = [item async for item in relay(prepared(client), "req-4", record)]
    assert record.error_code == "upstream_failed"
    assert not record.cancelled
