"""Metrics and logs after real requests through the gateway to the co-launched Triton."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config import ObservabilitySettings
from gateway.observability.logging import JsonFormatter
from gateway.observability.tracing import REQUEST_ID
from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.conftest import e2e_settings, make_image
from tests.gateway.observability.test_tracing import OtlpReceiver
from tests.live_gateway import serving

pytestmark = pytest.mark.e2e

SECRET_PROMPT = "zebra-violet-secret-prompt"
MODEL = "reference-llava"


def metric_values(text: str) -> dict[str, float]:
    """name{sorted labels} -> value, for the gateway's own series."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return values


async def streamed_request(http: httpx.AsyncClient, request_id: str) -> str:
    image = "data:image/png;base64," + base64.b64encode(make_image(11)).decode()
    body = {
        "model": MODEL,
        "max_tokens": 12,
        "min_tokens": 12,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": SECRET_PROMPT},
                    {"type": "image_url", "image_url": {"url": image}},
                ],
            }
        ],
    }
    headers = {"X-Request-Id": request_id}
    async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["x-request-id"] == request_id
        return "".join([line async for line in response.aiter_lines()])


async def test_metrics_show_non_zero_histograms_after_a_request(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        await streamed_request(http, "metrics-e2e-1")
        response = await http.get("/metrics")
    assert response.status_code == 200
    values = metric_values(response.text)
    model = f"model={MODEL}"
    for histogram in (
        f"mmgw_time_to_first_token_seconds_sum{{{model}}}",
        f"mmgw_inter_token_seconds_sum{{{model}}}",
        f"mmgw_request_duration_seconds_sum{{endpoint=/v1/chat/completions,{model}}}",
        f"mmgw_media_prepare_seconds_sum{{{model}}}",
    ):
        assert values[histogram] > 0, histogram
    assert values[f"mmgw_inter_token_seconds_count{{{model}}}"] >= 11
    ok = f"mmgw_requests_total{{code=,endpoint=/v1/chat/completions,{model},status=200}}"
    assert values[ok] >= 1
    assert values[f"mmgw_kv_reuse_ids_sent_total{{{model}}}"] >= 1
    for stage in ("fetch", "decode", "preprocess"):
        assert values[f"mmgw_media_seconds_sum{{kind=image,stage={stage}}}"] > 0, stage
    assert values["mmgw_media_bytes_total{kind=image}"] > 0
    assert values["mmgw_media_pixels_total{kind=image}"] > 0
    assert values["mmgw_queue_seconds_count{queue=decode}"] >= 1
    assert values[f"mmgw_tokens_total{{{model},type=completion}}"] >= 12
    assert values["mmgw_in_flight_requests{}"] == 0
    assert values["mmgw_kv_reuse_id_collisions_total{}"] == 0


async def test_errors_are_counted_by_code(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=60) as http:
        bad = {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}
        assert (await http.post("/v1/chat/completions", json=bad)).status_code == 404
        values = metric_values((await http.get("/metrics")).text)
    key = (
        "mmgw_requests_total{code=model_not_found,endpoint=/v1/chat/completions,"
        "model=unknown,status=404}"
    )
    assert values[key] >= 1


async def test_one_json_access_line_per_request_without_the_prompt(
    gateway_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        await streamed_request(http, "log-e2e-7")
    formatter = JsonFormatter()
    lines = [
        formatter.format(r)
        for r in caplog.records
        if r.name == "gateway.access" and getattr(r, "fields", {}).get("request_id") == "log-e2e-7"
    ]
    assert len(lines) == 1
    assert SECRET_PROMPT not in lines[0] and "base64" not in lines[0]
    entry = json.loads(lines[0])
    assert entry["msg"] == "request" and entry["level"] == "info"
    assert entry["model"] == MODEL and entry["status"] == 200 and entry["stream"] is True
    assert entry["prompt_tokens"] > 576 and entry["completion_tokens"] == 12
    assert entry["media_items"] == 1 and entry["request_bytes"] > 1000
    assert entry["ttft_ms"] > 0 and entry["duration_ms"] >= entry["ttft_ms"]
    assert entry["tokens_per_s"] > 0 and entry["finish_reason"] == "length"


async def test_a_traced_request_s_spans_reach_an_otlp_receiver_with_triton_s_request_id(
    embedded_triton: EmbeddedTriton,
) -> None:
    """The real gRPC client notes the send; every span carries the id Triton got."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), OtlpReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    OtlpReceiver.received.clear()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    traced = ObservabilitySettings(tracing=True, otlp_traces_endpoint=endpoint)
    settings = e2e_settings(embedded_triton).model_copy(update={"observability": traced})
    try:
        async with serving(settings) as url, httpx.AsyncClient(base_url=url, timeout=120) as http:
            await streamed_request(http, "traced-e2e-1")
        # The app's shutdown flushed the last batch.
    finally:
        server.shutdown()
        server.server_close()
    spans = [
        span
        for request in OtlpReceiver.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    mine = {
        span.name: {a.key: a.value for a in span.attributes}
        for span in spans
        if any(
            a.key == REQUEST_ID and a.value.string_value == "traced-e2e-1" for a in span.attributes
        )
    }
    expected = {"POST /v1/chat/completions", "media.decode", "triton.send", "first_token"}
    assert expected <= set(mine), sorted(mine)
    send = mine["triton.send"]
    assert send["request_id"].string_value.startswith("traced-e2e-1")
    assert send["model"].string_value == "reference_llava"
    assert mine["last_token"]["mmgw.tokens"].int_value == 12


async def test_a_small_image_on_the_event_loop_gets_the_answer_a_thread_gives(
    gateway_url: str,
) -> None:
    """The same small JPEG, greedy, several times: the loop prepares some of them
    (``[decode] inline_max_pixels``), a thread the rest, and Triton answers them alike."""
    jpeg = make_image(23, (336, 336), "JPEG")
    body = {
        "model": MODEL,
        "max_tokens": 6,
        "temperature": 0,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "describe"},
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()
                        },
                    },
                ],
            }
        ],
    }
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120) as http:
        before = metric_values((await http.get("/metrics")).text)
        answers = set()
        for _ in range(8):
            response = await http.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            answers.add(response.json()["choices"][0]["message"]["content"])
            await asyncio.sleep(0.05)  # the loop rests after each image it prepared
        after = metric_values((await http.get("/metrics")).text)

    def ran(where: str) -> float:
        key = f"mmgw_media_items_total{{where={where}}}"
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert len(answers) == 1
    assert ran("loop") >= 1 and ran("loop") + ran("thread") == 8
