"""The fake Triton keeps the contract it imitates: the reference models' configs, Triton's
request checks, the ensemble's streamed deltas, cancellation, Whisper's token ids."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from gateway.errors import InvalidRequest, UpstreamFailed, UpstreamUnavailable
from gateway.families.whisper.tokens import load_tokenizer
from gateway.families.whisper.wire import output_ids
from gateway.triton.outputs import is_final, output_array, text_response
from tests.fakes.triton import FakeTriton
from tests.fakes.triton_configs import ensemble_config, whisper_direct_config

REPO = Path(__file__).resolve().parents[2]


def pbtxt(path: str) -> dict:
    """A config.pbtxt as get_model_config(as_json=True)["config"] shows it."""
    config = text_format.Parse((REPO / path).read_text(), model_config_pb2.ModelConfig())
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def interface(config: dict) -> dict:
    keys = ("name", "data_type", "dims", "optional")
    return {
        "input": [{k: e[k] for k in keys if k in e} for e in config["input"]],
        "output": [{k: e[k] for k in keys if k in e} for e in config["output"]],
        "max_batch_size": config["max_batch_size"],
        "decoupled": config["model_transaction_policy"]["decoupled"],
    }


@pytest.mark.parametrize(
    ("path", "config"),
    [
        ("server_repo/reference/reference_llava/config.pbtxt", ensemble_config("x")),
        (
            "server_repo/bench_models/loadgen_ensemble/config.pbtxt",
            ensemble_config("x", log_probs=False, guided=False),
        ),
        (
            "server_repo/reference/reference_llava_onevision/config.pbtxt",
            ensemble_config("x", image="image_bytes_input", video=True, spelling="current"),
        ),
        ("server_repo/reference/reference_whisper/config.pbtxt", whisper_direct_config("x")),
    ],
)
def test_the_configs_are_the_reference_models_interfaces(path: str, config: dict) -> None:
    assert interface(config) == interface(pbtxt(path))


def test_tokens_per_block_is_a_string_parameter_as_in_the_reference() -> None:
    reference = pbtxt("server_repo/reference/reference_llava/config.pbtxt")
    assert (
        ensemble_config("x")["parameters"]["tokens_per_block"]
        == (reference["parameters"]["tokens_per_block"])
    )


def tensor(name: str, datatype: str, array: np.ndarray) -> grpcclient.InferInput:
    infer_input = grpcclient.InferInput(name, list(array.shape), datatype)
    infer_input.set_data_from_numpy(array)
    return infer_input


def text_inputs(max_tokens: int = 3, **flags: bool) -> list[grpcclient.InferInput]:
    inputs = [
        tensor("text_input", "BYTES", np.array([[b"hi there"]], dtype=np.object_)),
        tensor("max_tokens", "INT32", np.array([[max_tokens]], np.int32)),
    ]
    for name, value in {"stream": True, **flags}.items():
        inputs.append(tensor(name, "BOOL", np.array([[value]])))
    return inputs


async def collect(fake: FakeTriton, inputs: list, model: str = "ensemble") -> list:
    return [r async for r in fake.stream(model, inputs, "r1")]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda i: [*i, tensor("bogus", "INT32", np.array([[1]], np.int32))], "unexpected"),
        (lambda i: [tensor("max_tokens", "FP32", np.array([[3]], np.float32)), i[0]], "data-type"),
        (lambda i: [i[0], tensor("max_tokens", "INT32", np.array([3], np.int32))], "shape"),
        (lambda i: [i[0], tensor("max_tokens", "INT32", np.array([[3, 4]], np.int32))], "shape"),
        (lambda i: i[:1], "missing required inputs ['max_tokens']"),
    ],
    ids=["undeclared", "datatype", "rank", "dims", "required"],
)
async def test_requests_triton_would_refuse_are_refused(change, words: str) -> None:
    fake = FakeTriton()
    with pytest.raises(UpstreamFailed) as raised:
        await collect(fake, change(text_inputs()))
    assert words in raised.value.message
    assert fake.requests == []


async def test_an_output_the_model_does_not_declare_is_refused() -> None:
    fake = FakeTriton()
    with pytest.raises(UpstreamFailed) as raised:
        _ = [r async for r in fake.stream("ensemble", text_inputs(), "r1", ("output_ids",))]
    assert "unexpected inference output 'output_ids'" in raised.value.message


async def test_an_unknown_model_is_refused() -> None:
    with pytest.raises(UpstreamFailed) as raised:
        await collect(FakeTriton(), text_inputs(), model="nope")
    assert "unknown model: 'nope'" in raised.value.message


async def test_inputs_are_recorded_as_numpy() -> None:
    fake = FakeTriton()
    await collect(fake, text_inputs(return_num_input_tokens=True))
    (received,) = fake.requests
    assert received.request_id == "r1" and received.model == "ensemble"
    assert received.scalar("text_input") == "hi there"
    assert received.inputs["max_tokens"].dtype == np.int32
    assert received.inputs["max_tokens"].shape == (1, 1)


async def test_one_delta_per_token_then_a_final_response_with_the_counters_asked() -> None:
    fake = FakeTriton()
    fake.script.kv_cache_reused_blocks = 2
    flags = {"return_num_input_tokens": True, "return_num_output_tokens": True}
    responses = [text_response(r) for r in await collect(fake, text_inputs(3, **flags))]
    assert [r.text for r in responses[:-1]] == list(fake.script.tokens[:3])
    assert not any(r.final for r in responses[:-1]) and responses[-1].final
    assert responses[-1].counters == {"num_input_tokens": len("hi there"), "num_output_tokens": 3}
    flags["return_perf_metrics"] = True
    last = text_response((await collect(fake, text_inputs(3, **flags)))[-1])
    assert last.counters["kv_cache_reused_blocks"] == 2


async def test_without_stream_one_response_holds_the_whole_text() -> None:
    fake = FakeTriton()
    (only,) = await collect(fake, text_inputs(2, stream=False))
    assert is_final(only) and text_response(only).text == "".join(fake.script.tokens[:2])


async def test_an_error_response_after_k_tokens() -> None:
    fake = FakeTriton()
    fake.script.fail_after = 1
    fake.script.error = "max_tokens exceeds the engine's limit"
    seen = []
    with pytest.raises(InvalidRequest) as raised:  # what translate_error makes of it
        async for response in fake.stream("ensemble", text_inputs(), "r1"):
            seen.append(text_response(response).text)
    assert seen == [fake.script.tokens[0]] and raised.value.code == "model_rejected"
    assert fake.cancelled == []


async def test_closing_early_is_recorded_as_a_cancellation() -> None:
    fake = FakeTriton()
    stream = fake.stream("ensemble", text_inputs(), "r1")
    await anext(stream)
    await stream.aclose()
    assert fake.cancelled == ["r1"] and await fake.wait_cancelled("r1", 0.1)


async def test_a_hang_ends_only_when_cancelled() -> None:
    fake = FakeTriton()
    fake.script.hang_after = 1

    async def consume() -> None:
        async for _ in fake.stream("ensemble", text_inputs(), "r1"):
            pass

    task = asyncio.create_task(consume())
    await fake.wait_started("r1")
    await asyncio.sleep(0.01)
    assert not task.done() and fake.cancelled == []
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fake.cancelled == ["r1"]


async def test_down_means_unavailable_everywhere() -> None:
    fake = FakeTriton()
    fake.down = True
    with pytest.raises(UpstreamUnavailable):
        await fake.contract("ensemble")
    with pytest.raises(UpstreamUnavailable):
        await collect(fake, text_inputs())
    assert not await fake.is_ready(["ensemble"])
    fake.down = False
    assert await fake.is_ready(["ensemble"]) and not await fake.is_ready(["nope"])


def whisper_inputs(prompt: list[int], streaming: bool) -> list[grpcclient.InferInput]:
    return [
        tensor("encoder_input_features", "FP16", np.zeros((1, 3000, 80), np.float16)),
        tensor("input_lengths", "INT32", np.array([[3000]], np.int32)),
        tensor("decoder_input_ids", "INT32", np.array([prompt], np.int32)),
        tensor("request_output_len", "INT32", np.array([[100]], np.int32)),
        tensor("streaming", "BOOL", np.array([[streaming]])),
    ]


@pytest.mark.parametrize("streaming", [True, False])
async def test_whisper_answers_byte_token_ids_up_to_end_of_text(streaming: bool) -> None:
    fake = FakeTriton()
    tokenizer = load_tokenizer("bytes", 99)
    prompt = [tokenizer.sot, tokenizer.language_token("en"), tokenizer.no_timestamps]
    ids = []
    async for response in fake.stream("whisper", whisper_inputs(prompt, streaming), "w"):
        ids += output_ids({"output_ids": output_array(response, "output_ids")})
    assert tokenizer.decode(ids) == fake.script.transcript
    assert tokenizer.eot not in ids


def test_the_guided_ensemble_declares_tensorrt_llms_guide_inputs() -> None:
    """As all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt declares them: TYPE_STRING
    dims [1], optional; the fake records what the gateway sends in them."""
    declared = {e["name"]: e for e in ensemble_config("x", guided=True)["input"]}
    for name in ("guided_decoding_guide_type", "guided_decoding_guide"):
        assert declared[name]["data_type"] == "TYPE_STRING"
        assert declared[name]["dims"] == ["1"] and declared[name]["optional"]
    unguided = ensemble_config("x", guided=False)["input"]
    assert "guided_decoding_guide" not in {e["name"] for e in unguided}
