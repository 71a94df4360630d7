"""The benchmark fixture ``loadgen_ensemble`` on the real tritonserver: the ensemble contract,
``max_tokens`` tokens per stream at the configured pace, the final flag on the last token,
counters when asked, Triton's generate_stream, and a clean error for a malformed request."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient

from bench.stack import BENCH_MODEL, BENCH_REPOSITORY, set_token_interval
from gateway.triton.contract import parse_model_config
from gateway.triton.embedded import EmbeddedTriton

REFERENCE_CONFIG = BENCH_REPOSITORY.parent / "reference" / "reference_llava"


@pytest.fixture(scope="module")
async def bench_triton() -> AsyncIterator[EmbeddedTriton]:
    server = EmbeddedTriton(BENCH_REPOSITORY, models=[BENCH_MODEL], ready_timeout_s=120)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _tensor(name: str, datatype: str, value: Any, dtype: Any) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, [1, 1], datatype)
    tensor.set_data_from_numpy(np.array([[value]], dtype=dtype))
    return tensor


async def _stream(
    triton: EmbeddedTriton, tokens: int, stream: bool = True, counters: bool = False
) -> list[tuple[float, grpcclient.InferResult]]:
    inputs = [
        _tensor("text_input", "BYTES", b"three word prompt", np.object_),
        _tensor("max_tokens", "INT32", tokens, np.int32),
        _tensor("stream", "BOOL", stream, np.bool_),
        _tensor("return_num_output_tokens", "BOOL", counters, np.bool_),
        _tensor("return_num_input_tokens", "BOOL", counters, np.bool_),
    ]
    client = grpcclient.InferenceServerClient(triton.grpc_url)

    async def one() -> AsyncIterator[dict[str, Any]]:
        yield {"model_name": BENCH_MODEL, "inputs": inputs}

    got = []
    try:
        async for result, error in client.stream_infer(one()):
            assert error is None, error
            got.append((time.perf_counter(), result))
    finally:
        await client.close()
    return got


def _text(result: grpcclient.InferResult) -> str:
    return result.as_numpy("text_output").reshape(-1)[0].decode()


async def test_declares_the_reference_ensemble_contract(bench_triton: EmbeddedTriton) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        config = (await http.get(f"{bench_triton.http_url}/v2/models/{BENCH_MODEL}/config")).json()
    reference = (REFERENCE_CONFIG / "config.pbtxt").read_text()
    contract = parse_model_config(config)
    assert contract.decoupled
    for name in [*contract.inputs, *(o["name"] for o in config["output"])]:
        assert f'name: "{name}"' in reference, name


async def test_streams_max_tokens_at_the_configured_pace(bench_triton: EmbeddedTriton) -> None:
    await set_token_interval(bench_triton, 20_000)
    started = time.perf_counter()
    got = await _stream(bench_triton, 5, counters=True)
    assert len(got) == 5
    assert "".join(_text(r) for _, r in got) == " lorem ipsum dolor sit amet"
    # Due times are a fixed schedule 20 ms apart from arrival (a late token is followed by
    # a sooner one), so only the whole span has a hard lower bound.
    assert got[-1][0] - started >= 4 * 0.020
    last = got[-1][1]
    assert int(last.as_numpy("num_output_tokens")[0][0]) == 5
    assert int(last.as_numpy("num_input_tokens")[0][0]) == 3
    assert got[0][1].as_numpy("num_output_tokens") is None  # counters ride on the last only


async def test_flood_pace_and_one_response_when_not_streaming(
    bench_triton: EmbeddedTriton,
) -> None:
    await set_token_interval(bench_triton, 0)
    started = time.perf_counter()
    assert len(await _stream(bench_triton, 200)) == 200
    assert time.perf_counter() - started < 10
    whole = await _stream(bench_triton, 3, stream=False)
    assert [_text(r) for _, r in whole] == [" lorem ipsum dolor"]


async def test_generate_stream_and_a_malformed_request(bench_triton: EmbeddedTriton) -> None:
    await set_token_interval(bench_triton, 0)
    url = f"{bench_triton.http_url}/v2/models/{BENCH_MODEL}"
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        body = {"text_input": "hi", "max_tokens": 4, "stream": True}
        answer = await http.post(f"{url}/generate_stream", json=body)
        events = [json.loads(line[6:]) for line in answer.text.splitlines() if line]
        assert [e["text_output"] for e in events] == [" lorem", " ipsum", " dolor", " sit"]
        bad = await http.post(f"{url}/generate", json={"text_input": "hi", "max_tokens": 0})
        assert bad.status_code >= 400 and "max_tokens" in bad.text
