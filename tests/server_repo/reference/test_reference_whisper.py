"""The two reference Whisper models in the real tritonserver, called as the gateway calls them.

``reference_whisper`` speaks TensorRT-LLM's encoder-decoder contract (mel in, token ids out);
``reference_whisper_bls`` speaks NVIDIA's ``whisper_bls`` (samples in, transcript out). Greedy
answers are compared with the same tiny checkpoint run in-process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import InferResult

from gateway.families.whisper.mel import log_mel, to_encoder_input
from server_repo.reference_kit.whisper import DEFAULT_PREFIX, WhisperEngine
from tests.audio_samples import speech_like

DIRECT, BLS = "reference_whisper", "reference_whisper_bls"


def _input(name: str, array: np.ndarray) -> grpcclient.InferInput:
    datatype = {"float16": "FP16", "float32": "FP32", "int32": "INT32", "bool": "BOOL"}.get(
        array.dtype.name, "BYTES"
    )
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


async def _call(
    client: grpcclient.InferenceServerClient, model: str, tensors: dict[str, np.ndarray]
) -> tuple[list[InferResult], str | None]:
    async def one() -> AsyncIterator[dict]:
        yield {
            "model_name": model,
            "inputs": [_input(n, a) for n, a in tensors.items()],
            "request_id": "t",
        }

    results: list[InferResult] = []
    async for result, error in client.stream_infer(one()):
        if error is not None:
            return results, str(error)
        results.append(result)
    return results, None


def _direct(samples: np.ndarray, prompt: list[int], max_new: int, stream: bool) -> dict:
    return {
        "encoder_input_features": to_encoder_input(log_mel(samples)),
        "input_lengths": np.array([[3000]], np.int32),
        "encoder_output_lengths": np.array([[1500]], np.int32),
        "decoder_input_ids": np.array([prompt], np.int32),
        "request_output_len": np.array([[max_new]], np.int32),
        "streaming": np.array([[stream]]),
    }


def _ids(results: list[InferResult]) -> list[int]:
    return [int(t) for r in results for t in r.as_numpy("output_ids").reshape(-1)]


async def test_configs_declare_both_contracts(client: grpcclient.InferenceServerClient) -> None:
    direct = (await client.get_model_config(DIRECT, as_json=True))["config"]
    names = {item["name"] for item in direct["input"]}
    assert {"encoder_input_features", "input_lengths", "encoder_output_lengths",
            "decoder_input_ids", "request_output_len", "end_id", "pad_id",
            "streaming"} <= names  # fmt: skip
    assert {o["name"] for o in direct["output"]} == {"output_ids", "sequence_length"}
    bls = (await client.get_model_config(BLS, as_json=True))["config"]
    assert [i["name"] for i in bls["input"]] == ["TEXT_PREFIX", "WAV", "WAV_LENS"]
    assert [o["name"] for o in bls["output"]] == ["TRANSCRIPTS"]


async def test_direct_streams_the_in_process_tokens(
    client: grpcclient.InferenceServerClient, whisper_engine: WhisperEngine
) -> None:
    samples = speech_like(6.0, 21)
    prompt = whisper_engine.encode_prefix(DEFAULT_PREFIX)
    streamed, error = await _call(client, DIRECT, _direct(samples, prompt, 24, stream=True))
    assert error is None
    whole, error = await _call(client, DIRECT, _direct(samples, prompt, 24, stream=False))
    assert error is None and len(whole) == 1
    assert all(r.as_numpy("output_ids").shape == (1, 1, 1) for r in streamed)
    features = to_encoder_input(log_mel(samples))[0].T.astype(np.float32)
    local = [t for t in whisper_engine.complete(features, prompt, 24) if t != whisper_engine.eot]
    assert _ids(streamed) == _ids(whole) == local
    assert int(whole[0].as_numpy("sequence_length")[0, 0]) == len(local)


async def test_bls_streams_cumulative_transcripts_capped_at_50_tokens(
    client: grpcclient.InferenceServerClient, whisper_engine: WhisperEngine
) -> None:
    samples = speech_like(8.0, 22)
    tensors = {
        "WAV": samples[None],
        "WAV_LENS": np.array([[samples.size]], np.int32),
        "TEXT_PREFIX": np.array([[b""]], dtype=np.object_),
    }
    results, error = await _call(client, BLS, tensors)
    assert error is None
    texts = [r.as_numpy("TRANSCRIPTS").reshape(-1)[0].decode() for r in results]
    assert 1 <= len(texts) <= 50
    assert all(later.startswith(earlier) for earlier, later in pairwise(texts))
    prompt = whisper_engine.encode_prefix(DEFAULT_PREFIX)
    local = whisper_engine.complete(whisper_engine.features(samples), prompt, 50)
    assert texts[-1] == whisper_engine.transcript(local)


@pytest.mark.parametrize(
    ("model", "tensors", "message"),
    [
        (BLS, {"WAV": np.zeros((1, 480_001), np.float32),
               "WAV_LENS": np.array([[480_001]], np.int32),
               "TEXT_PREFIX": np.array([[b""]], dtype=np.object_)}, "30 s"),
        (DIRECT, _direct(np.zeros(1600, np.float32), [257] * 70, 8, True), "decoder_input_ids"),
        (DIRECT, _direct(np.zeros(1600, np.float32), [257], 500, True), "max_seq_len"),
    ],
)  # fmt: skip
async def test_requests_the_engine_cannot_take_get_errors(
    client: grpcclient.InferenceServerClient, model: str, tensors: dict, message: str
) -> None:
    results, error = await _call(client, model, tensors)
    assert results == [] and error is not None and message in error
