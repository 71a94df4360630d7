"""The transcription pipeline over a fake Triton: window order, stitching, checks, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from gateway.config import REFERENCE_WHISPER, ServedModel, WhisperOptions
from gateway.errors import InvalidRequest, UpstreamFailed
from gateway.families._whisper_tokens import load_tokenizer
from gateway.families.whisper import Whisper
from gateway.pipeline.transcribe import TranscriptionJob, prepare_transcription, transcribe
from gateway.streaming.transcript import Transcript
from gateway.triton.contract import parse_model_config
from tests.fakes.triton_wire import infer_response

TOKENS = load_tokenizer("bytes", 99)
RATE = 16_000


@dataclass
class FakeClient:
    """Answers each window with ``<|0.00|> w<index> <|1.00|>``; later windows finish first."""

    fail_window: int | None = None
    calls: list[str] = field(default_factory=list)

    async def stream(
        self, model: str, inputs: list, request_id: str, outputs: tuple[str, ...] = ()
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


@dataclass
class FakeServed:
    config: ServedModel
    client: FakeClient
    contract: Any
    family: Whisper = field(default_factory=Whisper)

    async def get_contract(self) -> Any:
        return self.contract


def served(kind: str, client: FakeClient | None = None) -> FakeServed:
    names = {"direct": ("encoder_input_features", "decoder_input_ids", "request_output_len",
                        "streaming"),
             "bls": ("WAV", "WAV_LENS", "TEXT_PREFIX")}[kind]  # fmt: skip
    types = {"encoder_input_features": "TYPE_FP16", "streaming": "TYPE_BOOL"}
    inputs = [{"name": n, "data_type": types.get(n, "TYPE_INT32"), "dims": [-1]} for n in names]
    config = parse_model_config(
        {"name": kind, "input": inputs, "model_transaction_policy": {"decoupled": True}}
    )
    options = REFERENCE_WHISPER.model_copy(update={"window_s": 10.0})
    model = ServedModel(id="w", family="whisper", triton_model=kind, whisper=options)
    return FakeServed(model, client or FakeClient(), config)


def audio(seconds: float) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(int(seconds * RATE)).astype(np.float32)


async def _run(prepared, stream: bool = True) -> tuple[list[str], Transcript]:
    items = [item async for item in transcribe(prepared, "req", stream=stream)]
    assert isinstance(items[-1], Transcript)
    return items[:-1], items[-1]


async def test_windows_run_concurrently_but_stream_in_order() -> None:
    model = served("direct")
    job = TranscriptionJob(timestamps=True)
    prepared = await prepare_transcription(model, job, audio(35.0))
    assert len(prepared.windows) == 4
    deltas, result = await _run(prepared)
    assert "".join(deltas) == result.text == "w0 w1 w2 w3"
    assert model.client.calls[0] == "req-lang"  # no language given: Whisper guesses first
    assert result.language == "german"
    starts = [w.start_s for w in prepared.windows]
    assert [(s.start, s.end) for s in result.segments] == [(t, t + 1.0) for t in starts]
    assert [s.id for s in result.segments] == [0, 1, 2, 3]
    assert result.completion_tokens == 4 * 6 and result.prompt_tokens == 4 * 3


async def test_bls_windows_and_their_segments() -> None:
    prepared = await prepare_transcription(served("bls"), TranscriptionJob(), audio(12.0))
    deltas, result = await _run(prepared, stream=False)
    assert deltas == [] and result.text == "w0 done w1 done" and result.language == "english"
    ends = [round(s.end, 2) for s in result.segments]
    assert ends == [round(prepared.windows[0].end_s, 2), 12.0]


@pytest.mark.parametrize(
    ("job", "code"),
    [
        (TranscriptionJob(prompt="names"), "unsupported_parameter"),
        (TranscriptionJob(temperature=0.5), "unsupported_parameter"),
        (TranscriptionJob(task="translate"), "language_required"),
        (TranscriptionJob(language="xx"), "unsupported_language"),
    ],
)
async def test_what_whisper_bls_cannot_do_is_refused(job: TranscriptionJob, code: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await prepare_transcription(served("bls"), job, audio(1.0))
    assert caught.value.code == code


async def test_cantonese_needs_a_100_language_model() -> None:
    model = served("direct")
    with pytest.raises(InvalidRequest):
        await prepare_transcription(model, TranscriptionJob(language="yue"), audio(1.0))
    model.config = model.config.model_copy(update={"whisper": WhisperOptions(n_mels=128)})
    prepared = await prepare_transcription(model, TranscriptionJob(language="yue"), audio(1.0))
    assert prepared.job.language == "yue"


async def test_a_failing_window_fails_the_transcription() -> None:
    prepared = await prepare_transcription(
        served("direct", FakeClient(fail_window=2)), TranscriptionJob(language="en"), audio(35.0)
    )
    received: list[str] = []
    with pytest.raises(UpstreamFailed, match="window 2"):
        async for item in transcribe(prepared, "req"):
            received.append(item)  # type: ignore[arg-type]
    assert "".join(received) == "w0 w1"  # earlier windows already streamed
