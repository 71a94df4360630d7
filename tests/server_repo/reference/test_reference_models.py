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
from collections.abc import AsyncIterator, Mapping
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import InferResult, service_pb2, service_pb2_grpc
from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

from gateway.triton.embedded import EmbeddedTriton
from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from tests.server_repo.samples import llava_pixels, rgb_image

LLAVA, ONEVISION = "reference_llava", "reference_llava_onevision"


@pytest.fixture(scope="module")
async def client(
    embedded_triton: EmbeddedTriton,
) -> AsyncIterator[grpcclient.InferenceServerClient]:
    triton = grpcclient.InferenceServerClient(embedded_triton.grpc_url)
    yield triton
    await triton.close()


@pytest.fixture(scope="module")
async def stub(
    embedded_triton: EmbeddedTriton,
) -> AsyncIterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    channel = grpc.aio.insecure_channel(embedded_triton.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    await channel.close()


def _one(value: Any, dtype: Any) -> np.ndarray:
    return np.array([[value]], dtype=dtype)


def _tensors(text: str, max_tokens: int, **extra: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "text_input": _one(text.encode(), np.object_),
        "max_tokens": _one(max_tokens, np.int32),
        **extra,
    }


def _infer_request(model: str, tensors: Mapping[str, np.ndarray]) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, array in tensors.items():
        request.inputs.add(name=name, datatype=np_to_triton_dtype(array.dtype), shape=array.shape)
        if array.dtype == np.object_:
            raw = serialize_byte_tensor(array).item()
        else:
            raw = np.ascontiguousarray(array).tobytes()
        request.raw_input_contents.append(raw)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


async def _stream(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    model: str,
    tensors: Mapping[str, np.ndarray],
    timeout_s: float = 60.0,
) -> tuple[list[InferResult], str | None]:
    """Send one request; collect responses up to the empty final one (or the first error)."""
    finished = asyncio.Event()

    async def requests() -> AsyncIterator[service_pb2.ModelInferRequest]:
        yield _infer_request(model, tensors)
        await finished.wait()

    call = stub.ModelStreamInfer(requests())
    results: list[InferResult] = []
    error: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async for response in call:
                if response.error_message:
                    error = response.error_message
                    break
                results.append(InferResult(response.infer_response))
                if response.infer_response.parameters["triton_final_response"].bool_param:
                    break
    finally:
        finished.set()
        call.cancel()
    return results, error


def _texts(results: list[InferResult]) -> list[str]:
    return [r.as_numpy("text_output")[0, 0].decode() for r in results[:-1]]


def _int(result: InferResult, name: str) -> int:
    return int(result.as_numpy(name)[0, 0])


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
        "temperature": _one(0.8, np.float32),
        "top_k": _one(40, np.int32),
        "random_seed": _one(1234, np.uint64),
    }
    streamed, error = await _stream(
        stub, LLAVA, _tensors("Describe it.", 12, stream=_one(True, np.bool_), **sampling)
    )
    assert error is None
    whole, error = await _stream(stub, LLAVA, _tensors("Describe it.", 12, **sampling))
    assert error is None and len(whole) == 2
    deltas = _texts(streamed)
    assert len(deltas) == 12 or streamed[-2].as_numpy("text_output")[0, 0] == b""
    assert "".join(deltas) == _texts(whole)[0] != ""
    assert streamed[-1].as_numpy("text_output") is None  # the final response is empty


async def test_llava_greedy_answer_matches_in_process(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, llava_engine: ReferenceEngine
) -> None:
    pixels = llava_pixels(8, 2)
    results, error = await _stream(
        stub, LLAVA,
        _tensors("What is this?", 10, image_input=pixels[None],
                 return_num_input_tokens=_one(True, np.bool_)),
    )  # fmt: skip
    assert error is None
    local = llava_engine.complete(GenerationRequest("What is this?", 10, images=pixels))
    assert _texts(results) == [local.text]
    assert _int(results[0], "num_input_tokens") == local.stats.input_tokens


@pytest.mark.parametrize("media", ["image", "video", "both"])
async def test_onevision_raw_pixels_and_video(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, onevision_engine: ReferenceEngine, media: str
) -> None:
    images = rgb_image(11, 60, 80) if media in ("image", "both") else None
    video = rgb_image(12, 32, 48, count=3) if media in ("video", "both") else None
    extra = {"return_num_input_tokens": _one(True, np.bool_)}
    if images is not None:
        extra["image_bytes_input"] = images[None]
    if video is not None:
        extra["video_bytes_input"] = video[None]
    results, error = await _stream(stub, ONEVISION, _tensors("What happens?", 8, **extra))
    assert error is None
    local = onevision_engine.complete(
        GenerationRequest("What happens?", 8, images=images, video=video)
    )
    assert _texts(results) == [local.text] and local.text
    assert _int(results[0], "num_input_tokens") == local.stats.input_tokens


@pytest.mark.parametrize(
    ("model", "tensors", "message"),
    [
        (LLAVA, _tensors("q", 0), "max_tokens"),
        (LLAVA, _tensors("q", 4, image_input=np.zeros((1, 1, 3, 100, 100), np.float16)), "336"),
        (ONEVISION, _tensors("q", 4, image_bytes_input=np.zeros((1, 1, 8, 8, 4), np.uint8)), "RGB"),
        (ONEVISION, _tensors("q", 100_000), "positions"),
    ],
)
async def test_bad_requests_get_an_error_not_a_hang(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, model: str, tensors: dict, message: str
) -> None:
    results, error = await _stream(stub, model, tensors, timeout_s=30)
    assert results == [] and error is not None
    assert message in error


async def test_kv_reuse_outputs_with_the_extra_id(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    names = ("return_num_input_tokens", "return_num_output_tokens", "return_perf_metrics")
    flags = {name: _one(True, np.bool_) for name in names}
    request = _tensors(
        "Is it reused?", 6, image_input=llava_pixels(21)[None],
        prompt_table_extra_id=_one(987654321, np.uint64), stream=_one(True, np.bool_), **flags,
    )  # fmt: skip
    first, error = await _stream(stub, LLAVA, request)
    assert error is None
    second, error = await _stream(stub, LLAVA, request)
    assert error is None
    last_first, last_second = first[-2], second[-2]  # the final response carries no outputs
    assert _int(last_first, "kv_cache_reused_blocks") == 0
    reused = _int(last_second, "kv_cache_reused_blocks")
    inputs = _int(last_second, "num_input_tokens")
    assert reused == inputs // 16 > 0
    total = _int(last_second, "kv_cache_alloc_total_blocks")
    assert total == -(-(inputs + _int(last_second, "num_output_tokens")) // 16)
    assert _int(last_second, "kv_cache_alloc_new_blocks") == total - reused
    assert _texts(first) == _texts(second)
    assert [_int(r, "num_output_tokens") for r in second[:-1]] == list(range(1, 7))


async def test_asyncio_client_half_close_receives_every_response(
    client: grpcclient.InferenceServerClient,
) -> None:
    """The gateway's way: one request, half-close, read until Triton ends the stream."""
    inputs = []
    for name, array in _tensors("Go on.", 5, stream=_one(True, np.bool_)).items():
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
    long_request = _tensors("Tell me a long story.", 16000, end_id=_one(-1, np.int32))
    calls = []
    for _ in range(2):
        finished = asyncio.Event()

        async def requests(done: asyncio.Event = finished) -> AsyncIterator[Any]:
            yield _infer_request(ONEVISION, long_request)
            await done.wait()

        calls.append((stub.ModelStreamInfer(requests()), finished))
    await asyncio.sleep(1.0)  # both are generating now (not streamed: no response yet)
    for call, finished in calls:
        call.cancel()
        finished.set()
    loop = asyncio.get_running_loop()
    started = loop.time()
    results, error = await _stream(stub, ONEVISION, _tensors("Quick?", 4), timeout_s=60)
    assert error is None and len(results) == 2
    assert loop.time() - started < 5.0
