"""Speech on the request skeleton, over a fake Triton: window order, stitching, refusals,
failures, and a chat request's max_tokens and stop strings honoured for a speech model.

The fake answers as triton-contract.md section 4 says each Whisper contract does: ``output_ids``
token by token (the encoder-decoder ``tensorrt_llm`` model) or cumulative ``TRANSCRIPTS``
(``whisper_bls``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from gateway.config import REFERENCE_WHISPER, ServedModel, WhisperOptions
from gateway.errors import ClientError, InvalidRequest, UpstreamFailed
from gateway.families.base import SpeechOptions
from gateway.families.calls import GenerationRequest, Outcome, Sampling, Transcript
from gateway.families.events import Done, TextDelta
from gateway.families.registry import get_family
from gateway.families.whisper.tokens import load_tokenizer
from gateway.pipeline.relay import family_plan, prepared, relay
from gateway.pipeline.transcribe import TranscriptionJob, check_transcription, prepare_samples
from gateway.served import ServedRuntime
from gateway.triton.contract import parse_model_config
from tests.fakes.triton_wire import infer_response

TOKENS = load_tokenizer("bytes", 99)
RATE = 16_000


@dataclass
class FakeClient:
    """Answers each window with ``<|0.00|> w<index> <|1.00|>``; later windows finish first."""

    fail_window: int | None = None
    calls: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    url = "fake:1"

    async def contract(self, model_name: str) -> Any:
        return parse_model_config(self.config)

    async def stream(
        self,
        model: str,
        inputs: list,
        request_id: str,
        outputs: tuple[str, ...] = (),
        route: Any = None,
    ) -> AsyncIterator[Any]:
        self.calls.append(request_id)
        if request_id.endswith("-lang"):
            yield infer_response(output_ids=np.array([[[TOKENS.language_token("de")]]], np.int32))
            return
        index = int(request_id.rsplit("-w", 1)[1])
        await asyncio.sleep(0.05 * (4 - index))
        if index == self.fail_window:
            raise UpstreamFailed(f"window {index} failed")
        if "TRANSCRIPTS" in outputs:
            for text in (f"w{index}", f"w{index} done"):
                yield infer_response(TRANSCRIPTS=np.array([[text.encode()]], dtype=np.object_))
            return
        ids = [TOKENS.timestamp_begin, *TOKENS.encode(f" w{index}"), TOKENS.timestamp_begin + 50]
        for token in [*ids, TOKENS.eot]:
            yield infer_response(output_ids=np.array([[[token]]], np.int32))


def served(
    kind: str, client: FakeClient | None = None, options: WhisperOptions | None = None
) -> ServedRuntime:
    names = {"direct": ("encoder_input_features", "decoder_input_ids", "request_output_len",
                        "streaming"),
             "bls": ("WAV", "WAV_LENS", "TEXT_PREFIX")}[kind]  # fmt: skip
    types = {"encoder_input_features": "TYPE_FP16", "streaming": "TYPE_BOOL",
             "WAV": "TYPE_FP32", "TEXT_PREFIX": "TYPE_STRING"}  # fmt: skip
    dims = {"encoder_input_features": [-1, -1]}
    inputs = [{"name": n, "data_type": types.get(n, "TYPE_INT32"), "dims": dims.get(n, [-1])}
              for n in names]  # fmt: skip
    client = client or FakeClient()
    client.config = {"name": kind, "input": inputs, "model_transaction_policy": {"decoupled": True}}
    options = options or REFERENCE_WHISPER.model_copy(update={"window_s": 10.0})
    model = ServedModel(id="w", family="whisper", triton_model=kind, whisper=options)
    return ServedRuntime(model, get_family("whisper", options), client)  # type: ignore[arg-type]


def audio(seconds: float) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(int(seconds * RATE)).astype(np.float32)


def job(sampling: Sampling | None = None, **speech: Any) -> TranscriptionJob:
    return TranscriptionJob(SpeechOptions(**speech), sampling or Sampling(temperature=0.0))


async def transcription(model: ServedRuntime, request: TranscriptionJob, samples: np.ndarray):
    """What prepare_transcription does once the upload is decoded (its seam takes the served
    model alone: the policy rides on it)."""
    request = await check_transcription(model, request)
    return await prepare_samples(model, request, samples, stream=True)


async def _plain(ready) -> list[str | Outcome]:
    """The relay's events as text pieces, then the outcome."""
    return [
        event.text if isinstance(event, TextDelta) else event.outcome
        async for event in relay(ready, "req")
        if isinstance(event, TextDelta | Done)
    ]


async def _run(ready, stream: bool = True) -> tuple[list[str], Transcript]:
    items = await _plain(ready)
    outcome = items[-1]
    assert isinstance(outcome, Outcome) and outcome.transcript is not None
    return items[:-1], outcome.transcript


async def test_windows_run_concurrently_but_stream_in_order() -> None:
    model = served("direct")
    ready = await transcription(model, job(timestamps=True), audio(35.0))
    assert len(ready.plan.calls) == 1  # the language guess comes first
    deltas, result = await _run(ready)
    assert "".join(deltas) == result.text == "w0 w1 w2 w3"
    assert model.client.calls[0] == "req-lang"  # no language given: Whisper guesses first
    assert result.language == "german"
    assert [s.id for s in result.segments] == [0, 1, 2, 3]
    starts = [s.start for s in result.segments]
    assert starts == sorted(starts) and starts[0] == 0.0
    assert all(round(s.end - s.start, 2) == 1.0 for s in result.segments)
    assert result.completion_tokens == 4 * 6 and result.prompt_tokens == 4 * 3


async def test_bls_windows_and_their_segments() -> None:
    ready = await transcription(served("bls"), job(), audio(12.0))
    deltas, result = await _run(ready)
    assert "".join(deltas) == "w0 done w1 done" == result.text and result.language == "english"
    ends = [round(s.end, 2) for s in result.segments]
    assert len(ends) == 2 and ends[-1] == 12.0 and ends[0] < 12.0


@pytest.mark.parametrize(
    ("request_job", "code"),
    [
        (job(prompt="names"), "unsupported_parameter"),
        (job(Sampling(temperature=0.5)), "unsupported_parameter"),
        (job(task="translate"), "language_required"),
        (job(language="xx"), "unsupported_language"),
    ],
)
async def test_what_whisper_bls_cannot_do_is_refused(
    request_job: TranscriptionJob, code: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await check_transcription(served("bls"), request_job)
    assert caught.value.code == code


async def test_cantonese_needs_a_100_language_model() -> None:
    with pytest.raises(InvalidRequest):
        await check_transcription(served("direct"), job(language="yue"))
    roomy = REFERENCE_WHISPER.model_copy(update={"n_mels": 128})
    checked = await check_transcription(served("direct", options=roomy), job(language="yue"))
    assert checked.speech.language == "yue"


async def test_a_model_that_does_not_transcribe_refuses_before_any_decoding() -> None:
    model = ServedModel(id="v", family="llava", triton_model="t", triton_url="fake:1")
    client = FakeClient(config={"name": "t", "input": [
        {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
        {"name": "max_tokens", "data_type": "TYPE_INT32", "dims": [1]}]})  # fmt: skip
    vision = ServedRuntime(model, get_family("llava"), client)  # type: ignore[arg-type]
    with pytest.raises(ClientError) as caught:
        await check_transcription(vision, job())
    assert caught.value.code == "invalid_model" and caught.value.param == "model"


async def test_a_failing_window_fails_the_transcription() -> None:
    model = served("direct", FakeClient(fail_window=2))
    ready = await transcription(model, job(language="en"), audio(35.0))
    received: list[str] = []
    with pytest.raises(UpstreamFailed, match="window 2"):
        async for event in relay(ready, "req"):
            assert isinstance(event, TextDelta)
            received.append(event.text)
    assert "".join(received) == "w0 w1"  # earlier windows already streamed


async def test_chat_to_a_speech_model_honours_max_tokens_and_stop_strings() -> None:
    """A chat request is capped like any chat: asked for 4 tokens, it gets 4 (not the clip):
    a timestamp, then " w0" in three byte tokens."""
    model = served("direct")
    contract = await model.get_contract()
    draft = GenerationRequest("", 4, True, Sampling(temperature=0.0))
    ready = prepared(model, contract, await family_plan(model, draft, audio(35.0)))
    items = await _plain(ready)
    outcome = items[-1]
    assert isinstance(outcome, Outcome) and outcome.finish_reason == "length"
    assert "".join(items[:-1]) == "w0" and outcome.usage.completion_tokens == 4
    draft = GenerationRequest("", 100, True, Sampling(temperature=0.0))
    ready = prepared(model, contract, await family_plan(model, draft, audio(35.0)), ("w2",))
    items = await _plain(ready)
    assert "".join(items[:-1]) == "w0 w1 " and items[-1].finish_reason == "stop"


async def test_chat_sampling_reaches_the_windows_as_it_would_for_any_family() -> None:
    model = served("direct")
    await model.get_contract()
    sampled = Sampling(temperature=0.7, seed=5)
    draft = GenerationRequest("", 100, True, sampled)
    plan = await family_plan(model, draft, audio(5.0))
    probe_then = plan.probe_then
    assert probe_then is not None
    windows = await asyncio.to_thread(probe_then, "de")
    assert windows.calls and all(call.sampling == sampled for call in windows.calls)
