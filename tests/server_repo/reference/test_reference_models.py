"""The reference models served by the real tritonserver, spoken to as the gateway will.

gRPC bidirectional streaming (the models are decoupled); requests carry the batch dimension.
The asyncio ``tritonclient`` cannot ask for Triton's empty final response (its
``stream_infer`` takes dicts and rejects ``triton_*`` parameters), so these tests build the
``ModelInferRequest`` protobuf themselves and set ``triton_enable_empty_final_response``, which
lets them check that every stream ends with the empty final response. Where a greedy answer is
checked, it is compared with the same model run in-process from the same tiny checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import np_to_triton_dtype

from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from tests.server_repo.reference.triton_stream import (
    infer_request,
    int_output,
    one,
    stream,
    tensors,
    texts,
)
from tests.server_repo.samples import llava_pixels, rgb_image

LLAVA, ONEVISION = "reference_llava", "reference_llava_onevision"


async def test_models_load_with_their_contract_names(
    client: grpcclient.InferenceServerClient,
) -> None:
    for model, names in ((LLAVA, {"min_length", "random_seed", "image_input"}),
                         (ONEVISION, {"min_tokens", "seed", "image_bytes_input",
                                      "video_bytes_input"})):  # fmt: skip
        assert await client.is_model_ready(model)
        config = (await client.get_model_config(model, as_json=True))["config"]
        declared = {item["name"] for item in config["input"]}
        assert names <= declared and "prompt_table_extra_id" in declared
        assert not declared & ({"min_length", "random_seed", "min_tokens", "seed"} - names)
        assert config["model_transaction_policy"]["decoupled"] is True
        assert {o["name"] for o in config["output"]} >= {
            "text_output", "num_input_tokens", "num_output_tokens", "kv_cache_reused_blocks",
            "kv_cache_alloc_new_blocks", "kv_cache_alloc_total_blocks",
        }  # fmt: skip


async def test_streamed_deltas_join_to_the_unstreamed_text(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    sampling = {
        "image_input": llava_pixels(5)[None],
        "temperature": one(0.8, np.float32),
        "top_k": one(40, np.int32),
        "random_seed": one(1234, np.uint64),
    }
    streamed, error = await stream(
        stub, LLAVA, tensors("Describe it.", 12, stream=one(True, np.bool_), **sampling)
    )
    assert error is None
    whole, error = await stream(stub, LLAVA, tensors("Describe it.", 12, **sampling))
    assert error is None and len(whole) == 2
    deltas = texts(streamed)
    assert len(deltas) == 12 or streamed[-2].as_numpy("text_output")[0, 0] == b""
    assert "".join(deltas) == texts(whole)[0] != ""
    assert streamed[-1].as_numpy("text_output") is None  # the final response is empty


async def test_llava_greedy_answer_matches_in_process(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, llava_engine: ReferenceEngine
) -> None:
    pixels = llava_pixels(8, 2)
    results, error = await stream(
        stub, LLAVA,
        tensors("What is this?", 10, image_input=pixels[None],
                 return_num_input_tokens=one(True, np.bool_)),
    )  # fmt: skip
    assert error is None
    local = llava_engine.complete(GenerationRequest("What is this?", 10, images=pixels))
    assert texts(results) == [local.text]
    assert int_output(results[0], "num_input_tokens") == local.stats.input_tokens
    assert results[0].as_numpy("output_log_probs") is None  # not asked for, not sent


async def test_log_probs_and_generation_logits_per_response(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, llava_engine: ReferenceEngine
) -> None:
    """Streamed: every log prob so far, this token's logits; unstreamed: all of them. The
    values are the in-process kit's (greedy at temperature 1: the raw log-softmax)."""
    pixels = llava_pixels(9)
    scores = {
        name: one(True, np.bool_) for name in ("return_log_probs", "return_generation_logits")
    }
    request = tensors("What is this?", 6, image_input=pixels[None], **scores)
    streamed, error = await stream(stub, LLAVA, {**request, "stream": one(True, np.bool_)})
    assert error is None
    whole, error = await stream(stub, LLAVA, request)
    assert error is None and len(whole) == 2
    scored = GenerationRequest(
        "What is this?", 6, images=pixels, return_log_probs=True, return_generation_logits=True
    )
    local = await asyncio.to_thread(lambda: list(llava_engine.generate(scored)))
    log_probs = [step.log_prob for step in local]
    vocab = local[0].logits.shape[0]
    assert len(streamed) == len(local) + 1 and streamed[-1].as_numpy("cum_log_probs") is None
    for count, (result, step) in enumerate(zip(streamed, local, strict=False), start=1):
        output = result.as_numpy("output_log_probs")
        assert output.dtype == np.float32 and output.shape == (1, 1, count)
        np.testing.assert_allclose(output[0, 0], log_probs[:count], atol=1e-5)
        cum = result.as_numpy("cum_log_probs")
        assert cum.dtype == np.float32 and cum.shape == (1, 1)
        assert cum[0, 0] == pytest.approx(step.cum_log_prob, abs=1e-5)
        logits = result.as_numpy("generation_logits")
        assert logits.dtype == np.float32 and logits.shape == (1, 1, 1, vocab)
        np.testing.assert_allclose(logits[0, 0, 0], step.logits, atol=1e-5)
    result = whole[0]
    assert result.as_numpy("output_log_probs").shape == (1, 1, len(local))
    np.testing.assert_allclose(result.as_numpy("output_log_probs")[0, 0], log_probs, atol=1e-5)
    assert result.as_numpy("cum_log_probs")[0, 0] == pytest.approx(sum(log_probs), abs=1e-4)
    logits = result.as_numpy("generation_logits")
    assert logits.shape == (1, 1, len(local), vocab)
    np.testing.assert_allclose(logits[0, 0], np.stack([s.logits for s in local]), atol=1e-5)


@pytest.mark.parametrize("media", ["image", "video", "both"])
async def test_onevision_raw_pixels_and_video(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, onevision_engine: ReferenceEngine, media: str
) -> None:
    images = rgb_image(11, 60, 80) if media in ("image", "both") else None
    video = rgb_image(12, 32, 48, count=3) if media in ("video", "both") else None
    extra = {"return_num_input_tokens": one(True, np.bool_)}
    if images is not None:
        extra["image_bytes_input"] = images[None]
    if video is not None:
        extra["video_bytes_input"] = video[None]
    results, error = await stream(stub, ONEVISION, tensors("What happens?", 8, **extra))
    assert error is None
    local = onevision_engine.complete(
        GenerationRequest("What happens?", 8, images=images, video=video)
    )
    assert texts(results) == [local.text] and local.text
    assert int_output(results[0], "num_input_tokens") == local.stats.input_tokens


@pytest.mark.parametrize(
    ("model", "tensors", "message"),
    [
        (LLAVA, tensors("q", 0), "max_tokens"),
        (LLAVA, tensors("q", 4, image_input=np.zeros((1, 1, 3, 100, 100), np.float16)), "336"),
        (ONEVISION, tensors("q", 4, image_bytes_input=np.zeros((1, 1, 8, 8, 4), np.uint8)), "RGB"),
        # max_tokens past the positions is reduced, as TensorRT-LLM does (test_engine.py); a
        # prompt that leaves no room is the error.
        (ONEVISION, tensors("q " * 100_000, 4), "positions"),
    ],
)
async def test_bad_requests_get_an_error_not_a_hang(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, model: str, tensors: dict, message: str
) -> None:
    results, error = await stream(stub, model, tensors, timeout_s=30)
    assert results == [] and error is not None
    assert message in error


async def test_kv_reuse_outputs_with_the_extra_id(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    names = ("return_num_input_tokens", "return_num_output_tokens", "return_perf_metrics")
    flags = {name: one(True, np.bool_) for name in names}
    request = tensors(
        "Is it reused?", 6, image_input=llava_pixels(21)[None],
        prompt_table_extra_id=one(987654321, np.uint64), stream=one(True, np.bool_), **flags,
    )  # fmt: skip
    first, error = await stream(stub, LLAVA, request)
    assert error is None
    second, error = await stream(stub, LLAVA, request)
    assert error is None
    last_first, last_second = first[-2], second[-2]  # the final response carries no outputs
    assert int_output(last_first, "kv_cache_reused_blocks") == 0
    reused = int_output(last_second, "kv_cache_reused_blocks")
    inputs = int_output(last_second, "num_input_tokens")
    assert reused == inputs // 16 > 0
    total = int_output(last_second, "kv_cache_alloc_total_blocks")
    assert total == -(-(inputs + int_output(last_second, "num_output_tokens")) // 16)
    assert int_output(last_second, "kv_cache_alloc_new_blocks") == total - reused
    assert texts(first) == texts(second)
    assert [int_output(r, "num_output_tokens") for r in second[:-1]] == list(range(1, 7))


async def test_asyncio_client_half_close_receives_every_response(
    client: grpcclient.InferenceServerClient,
) -> None:
    """The gateway's way: one request, half-close, read until Triton ends the stream."""
    inputs = []
    for name, array in tensors("Go on.", 5, stream=one(True, np.bool_)).items():
        tensor = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)

    async def one_request() -> AsyncIterator[dict[str, Any]]:
        yield {"model_name": ONEVISION, "inputs": inputs}

    async with asyncio.timeout(60):
        responses = [item async for item in client.stream_infer(one_request())]
    assert [error for _, error in responses] == [None] * 5
    assert all(result.as_numpy("text_output").shape == (1, 1) for result, _ in responses)


async def test_cancelled_requests_free_the_workers(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    """Two very long generations (both workers, ~1 min each) are cancelled by their clients;
    a third request is then served at once instead of waiting for them."""
    long_request = tensors("Tell me a long story.", 16000, end_id=one(-1, np.int32))
    calls = []
    for _ in range(2):
        finished = asyncio.Event()

        async def requests(done: asyncio.Event = finished) -> AsyncIterator[Any]:
            yield infer_request(ONEVISION, long_request)
            await done.wait()

        calls.append((stub.ModelStreamInfer(requests()), finished))
    await asyncio.sleep(1.0)  # both are generating now (not streamed: no response yet)
    for call, finished in calls:
        call.cancel()
        finished.set()
    loop = asyncio.get_running_loop()
    started = loop.time()
    results, error = await stream(stub, ONEVISION, tensors("Quick?", 4), timeout_s=60)
    assert error is None and len(results) == 2
    assert loop.time() - started < 5.0
