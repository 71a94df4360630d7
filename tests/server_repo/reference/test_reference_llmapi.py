"""reference_qwen2_5_vl in the real tritonserver, over tritonclient gRPC, no gateway.

It stands for NVIDIA's ``llmapi`` ``tensorrt_llm`` model (TensorRT-LLM's PyTorch backend), so
the checks are that contract's: its config (the table below, from NVIDIA's file), tensors
without a batch dimension, cumulative streaming, finish and stop reasons only when asked,
stop strings cut off, seeded sampling, image prompts from ``data:`` URIs, the refusal of any
other image URL, and a request ending when its client cancels it or a ``stop`` request names
it. A lean Triton serving this one model is started for the module.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tritonclient.grpc.aio as grpcclient

from gateway.triton.embedded import EmbeddedTriton
from server_repo.reference_kit import ReferenceEngine, load_engine
from server_repo.reference_kit.llmapi_request import LlmapiRequest
from server_repo.reference_kit.llmapi_triton import TOKENS_PER_BLOCK
from tests.conftest import reference_triton
from tests.server_repo.nvidia_llmapi import NVIDIA_INPUTS, NVIDIA_OUTPUTS
from tests.server_repo.reference.llmapi_client import MODEL, Answer, ask, data_url, inputs
from tests.server_repo.samples import rgb_image

# A negative presence penalty keeps the tiny model off its end token: a long generation.
ENDLESS: dict[str, Any] = {"sampling_param_presence_penalty": -10.0}


@pytest.fixture(scope="module")
async def llmapi_triton(reference_cache: Path) -> AsyncIterator[EmbeddedTriton]:
    server = reference_triton(reference_cache, models=[MODEL], ready_timeout_s=300)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="module")
async def client(llmapi_triton: EmbeddedTriton) -> AsyncIterator[grpcclient.InferenceServerClient]:
    triton = grpcclient.InferenceServerClient(llmapi_triton.grpc_url)
    yield triton
    await triton.close()


@pytest.fixture(scope="module")
def engine(reference_cache: Path) -> ReferenceEngine:
    """The same tiny checkpoint in-process, for the answers Triton should give."""
    return load_engine("qwen2_5_vl", cache_dir=reference_cache, device="cpu")


async def test_config_matches_nvidias_llmapi_model(
    client: grpcclient.InferenceServerClient,
) -> None:
    config = (await client.get_model_config(MODEL, as_json=True))["config"]
    declared = [
        (item["name"], item["data_type"], item["dims"], bool(item.get("optional", False)))
        for item in config["input"]
    ]
    assert declared == NVIDIA_INPUTS
    outputs = [(item["name"], item["data_type"], item["dims"]) for item in config["output"]]
    assert outputs == NVIDIA_OUTPUTS
    # model.yaml's triton_config: max_batch_size 0 (no batch dimension), decoupled.
    assert int(config.get("max_batch_size", 0)) == 0
    assert config["model_transaction_policy"]["decoupled"] is True


async def test_streamed_text_is_cumulative_and_ends_as_the_whole_answer(
    client: grpcclient.InferenceServerClient, engine: ReferenceEngine
) -> None:
    common = {"text_input": "Tell me a story.", "sampling_param_max_tokens": 12}
    quiet = {**common, "sampling_param_exclude_input_from_output": True}
    streamed = await ask(client, streaming=True, **quiet)
    whole = await ask(client, **quiet)
    assert streamed.error is None and whole.error is None
    assert len(whole.results) == 1 and len(streamed.results) > 2
    for before, after in zip(streamed.texts, streamed.texts[1:], strict=False):
        assert after.startswith(before) and len(after) > len(before)
    local = engine.complete(LlmapiRequest("Tell me a story.", 12))
    assert streamed.texts[-1] == whole.texts[0] == local.text
    # exclude_input_from_output defaults to false: the prompt comes back first.
    echoed = await ask(client, **common)
    assert echoed.texts[0] == "Tell me a story." + local.text


async def test_finish_reason_only_when_asked_and_none_until_the_last(
    client: grpcclient.InferenceServerClient,
) -> None:
    plain = await ask(client, text_input="Hi", streaming=True, sampling_param_max_tokens=3)
    names = {o.name for o in plain.results[-1].get_response().outputs}
    assert names == {"text_output"}
    asked = await ask(
        client,
        text_input="Hi",
        streaming=True,
        sampling_param_max_tokens=3,
        return_finish_reason=True,
        return_stop_reason=True,
    )
    reasons = asked.strings("finish_reason")
    assert reasons[-1] == "length" and set(reasons[:-1]) <= {"None"}
    assert asked.strings("stop_reason")[-1] == "None"
    scored = await ask(
        client, text_input="Hi", sampling_param_max_tokens=3, return_cumulative_logprob=True
    )
    assert scored.datatype("cumulative_logprob") == "BYTES"
    assert scored.number("cumulative_logprob") <= 0.0


def _single_token_stop(engine: ReferenceEngine, tokens: list[int]) -> tuple[str, int]:
    """A generated token whose text tokenizes back to itself alone, and where it first comes."""
    for token in tokens[1:]:
        text = engine.decode([token])
        if text.strip() and engine.encode(text) == [token]:
            return text, tokens.index(token)
    raise AssertionError("no usable stop string in the sample answer")


async def test_a_stop_string_ends_the_answer_and_is_cut_off(
    client: grpcclient.InferenceServerClient, engine: ReferenceEngine
) -> None:
    local = engine.complete(LlmapiRequest("Tell me a story.", 12))
    stop, at = _single_token_stop(engine, local.token_ids)
    answer = await ask(
        client,
        text_input="Tell me a story.",
        streaming=True,
        sampling_param_max_tokens=12,
        sampling_param_exclude_input_from_output=True,
        sampling_param_stop=[stop, "never-generated-123"],
        return_finish_reason=True,
        return_stop_reason=True,
    )
    assert answer.error is None
    assert answer.texts[-1] == engine.decode(local.token_ids[:at])
    assert answer.strings("finish_reason")[-1] == "stop"
    assert answer.strings("stop_reason")[-1] == stop


async def test_a_seed_replays_a_sampled_answer(client: grpcclient.InferenceServerClient) -> None:
    def sampled(seed: int) -> dict[str, Any]:
        return {
            "text_input": "Tell me a story.",
            "sampling_param_temperature": 1.0,
            "sampling_param_top_p": 0.95,
            "sampling_param_seed": seed,
            "sampling_param_max_tokens": 16,
            "sampling_param_exclude_input_from_output": True,
        }

    first, again, other = [await ask(client, **sampled(s)) for s in (7, 7, 8)]
    assert first.texts == again.texts
    assert first.texts != other.texts


async def test_every_sampling_param_reaches_the_model(
    client: grpcclient.InferenceServerClient, engine: ReferenceEngine
) -> None:
    values: dict[str, Any] = {
        "text_input": "Tell me a story.",
        "sampling_param_temperature": 0.7,
        "sampling_param_top_k": 20,
        "sampling_param_top_p": 0.9,
        "sampling_param_frequency_penalty": 0.5,
        "sampling_param_presence_penalty": 0.3,
        "sampling_param_seed": 11,
        "sampling_param_max_tokens": 30,
        "sampling_param_exclude_input_from_output": True,
    }
    answer = await ask(client, **values)
    request = LlmapiRequest(
        "Tell me a story.", 30, temperature=0.7, top_k=20, top_p=0.9,
        frequency_penalty=0.5, presence_penalty=0.3, seed=11,
    )  # fmt: skip
    assert answer.texts == [engine.complete(request).text]
    penalties = ("sampling_param_frequency_penalty", "sampling_param_presence_penalty")
    plain = await ask(client, **{k: v for k, v in values.items() if k not in penalties})
    assert plain.texts != answer.texts


async def test_images_as_data_urls_build_the_chat_prompt_and_reuse_kv_blocks(
    client: grpcclient.InferenceServerClient, engine: ReferenceEngine
) -> None:
    pictures = (rgb_image(1, 112, 168)[0], rgb_image(2, 168, 112)[0])
    request = {
        "text_input": "Compare them.",
        "image_url": [data_url(p) for p in pictures],
        "sampling_param_max_tokens": 6,
        "sampling_param_exclude_input_from_output": True,
        "sampling_param_return_perf_metrics": True,
    }
    first = await ask(client, **request)
    again = await ask(client, **request)
    assert first.error is None and again.error is None
    local = engine.complete(LlmapiRequest("Compare them.", 6, pictures=pictures))
    assert first.texts == again.texts == [local.text]
    prompt = engine.prepare(LlmapiRequest("Compare them.", 6, pictures=pictures)).prompt
    blocks = -(-len(prompt) // TOKENS_PER_BLOCK)
    assert first.number("kv_cache_missed_block") == blocks
    # NVIDIA's model.py sends numbers as str() in object arrays: BYTES despite the config.
    assert first.datatype("kv_cache_missed_block") == "BYTES"
    # The same pictures again: every full prompt block but the last one's is reused.
    assert again.number("kv_cache_reused_block") == len(prompt) // TOKENS_PER_BLOCK >= 2


async def test_an_http_image_url_is_refused_in_nvidias_words(
    client: grpcclient.InferenceServerClient,
) -> None:
    answer = await ask(client, text_input="What is it?", image_url=["http://images.example/a.png"])
    assert answer.error is not None
    assert "Error generating request: Unsupported image_url 'http://images.example/a.png': " in (
        answer.error
    )


async def _generated_tokens(triton: EmbeddedTriton) -> float:
    async with httpx.AsyncClient(trust_env=False) as http:
        text = (await http.get(f"http://127.0.0.1:{triton.metrics_port}/metrics")).text
    pattern = rf'^mmgw_reference_generated_tokens_total\{{model="{MODEL}"\}} (\S+)$'
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_a_cancelled_request_stops_generating(
    client: grpcclient.InferenceServerClient, llmapi_triton: EmbeddedTriton
) -> None:
    """Unstreamed, so that nothing but the cancellation loop can stop it (a streamed one would
    also stop when its next response fails to go out)."""
    done = asyncio.Event()

    async def one() -> AsyncIterator[dict[str, Any]]:
        values = {"text_input": "Go on.", "sampling_param_max_tokens": 20000}
        yield {"model_name": MODEL, "inputs": inputs(**values, **ENDLESS)}
        await done.wait()

    before = await _generated_tokens(llmapi_triton)
    stream = client.stream_infer(one())
    reader = asyncio.create_task(anext(aiter(stream), None))
    async with asyncio.timeout(30):
        while await _generated_tokens(llmapi_triton) < before + 16:
            await asyncio.sleep(0.1)
    stream.cancel()
    done.set()
    reader.cancel()
    await asyncio.sleep(1.0)  # ten of the model's 100 ms cancellation checks
    settled = await _generated_tokens(llmapi_triton)
    await asyncio.sleep(1.0)
    assert await _generated_tokens(llmapi_triton) == settled, "generation went on"
    assert settled - before < 20000


async def test_a_stop_request_ends_the_request_with_its_id(
    client: grpcclient.InferenceServerClient,
) -> None:
    long = {"text_input": "Go on.", "streaming": True, "sampling_param_max_tokens": 20000}
    target = asyncio.create_task(
        ask(client, request_id="job-7", return_finish_reason=True, **long, **ENDLESS)
    )
    await asyncio.sleep(1.0)
    stopper: Answer = await ask(client, request_id="job-7", text_input="", stop=True)
    assert stopper.error is not None and "Request cancelled by client" in stopper.error
    ended = await asyncio.wait_for(target, timeout=5)
    assert ended.error is None
    assert ended.strings("finish_reason")[-1] == "cancelled"
    nameless = await ask(client, text_input="", stop=True)
    assert nameless.error is not None and "A request id must be provided" in nameless.error
