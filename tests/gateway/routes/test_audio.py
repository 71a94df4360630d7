"""POST /v1/audio/transcriptions and /translations against the fake Whisper (the direct
encoder-decoder contract): the response formats, the event stream, what the gateway sends
(log-mel, decoder prompt, output budget), and a chat request to a speech model."""

from __future__ import annotations

import asyncio
import base64
import math
from typing import Any

import httpx
import numpy as np
import pytest
from openai import AsyncOpenAI
from openai.types.audio import TranscriptionTextDoneEvent

from gateway.config import REFERENCE_WHISPER
from gateway.families.whisper.tokens import WhisperTokenizer, load_tokenizer
from tests.audio_samples import encode, speech_like
from tests.fakes.app import AsgiCall, FakeGateway, chat, multipart, sse_payloads
from tests.fakes.triton import FakeTriton

URL = "/v1/audio/transcriptions"
SECONDS = 1.5
SPOKEN = " Grüße aus Köln."  # as Whisper writes it: a leading space; ü and ö take two tokens
WAV = encode(speech_like(SECONDS, seed=3))


@pytest.fixture
def tokenizer() -> WhisperTokenizer:
    return load_tokenizer(REFERENCE_WHISPER.vocabulary, 99)


@pytest.fixture(autouse=True)
def speech(fake: FakeTriton) -> None:
    fake.script.transcript = SPOKEN


def form(**fields: str) -> dict:
    return {"model": "fake-whisper", **fields}


def upload(data: bytes = WAV) -> dict:
    return {"file": ("speech.wav", data, "audio/wav")}


def prompt_of(fake: FakeTriton, request_id: str) -> list[int]:
    return fake.request(request_id).inputs["decoder_input_ids"].reshape(-1).tolist()


async def test_json_is_the_stripped_text_and_the_seconds_used(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.post(URL, data=form(), files=upload())
    assert response.status_code == 200
    assert response.json() == {
        "text": SPOKEN.strip(),
        "usage": {"type": "duration", "seconds": math.ceil(SECONDS)},
    }


async def test_the_language_is_detected_first_then_the_window_transcribed(
    http: httpx.AsyncClient, fake: FakeTriton, tokenizer: WhisperTokenizer
) -> None:
    fake.script.language = "fr"
    response = await http.post(
        URL,
        data=form(response_format="verbose_json"),
        files=upload(),
        headers={"X-Request-Id": "a1"},
    )
    assert response.json()["language"] == "french"
    assert [r.request_id for r in fake.requests] == ["a1-lang", "a1-w0"]
    assert prompt_of(fake, "a1-lang") == [tokenizer.sot]
    window = fake.request("a1-w0")
    prompt = prompt_of(fake, "a1-w0")
    assert prompt == [
        tokenizer.sot,
        tokenizer.language_token("fr"),
        tokenizer.special("<|transcribe|>"),
    ]
    features = window.inputs["encoder_input_features"]
    assert features.dtype == np.float16 and features.shape == (1, 3000, REFERENCE_WHISPER.n_mels)
    assert (
        window.scalar("input_lengths") == 3000 and window.scalar("encoder_output_lengths") == 1500
    )
    assert window.scalar("request_output_len") == REFERENCE_WHISPER.max_sequence_tokens - len(
        prompt
    )
    assert window.scalar("end_id") == tokenizer.eot
    assert window.scalar("runtime_top_k") == 1  # temperature 0: greedy
    assert window.scalar("streaming") is False


async def test_a_given_language_skips_detection(
    http: httpx.AsyncClient, fake: FakeTriton, tokenizer: WhisperTokenizer
) -> None:
    headers = {"X-Request-Id": "a2"}
    await http.post(URL, data=form(language="German"), files=upload(), headers=headers)
    assert [r.request_id for r in fake.requests] == ["a2-w0"]
    assert prompt_of(fake, "a2-w0") == [
        tokenizer.sot,
        tokenizer.language_token("de"),
        tokenizer.special("<|transcribe|>"),
        tokenizer.no_timestamps,
    ]


async def test_a_prompt_becomes_previous_text_within_the_decoders_limit(
    http: httpx.AsyncClient, fake: FakeTriton, tokenizer: WhisperTokenizer
) -> None:
    previous = "Köln " * 40  # more bytes than max_prompt_tokens
    headers = {"X-Request-Id": "a3"}
    await http.post(URL, data=form(language="de", prompt=previous), files=upload(), headers=headers)
    prompt = prompt_of(fake, "a3-w0")
    assert len(prompt) <= REFERENCE_WHISPER.max_prompt_tokens
    assert prompt[0] == tokenizer.special("<|startofprev|>")
    context = prompt[1 : prompt.index(tokenizer.sot)]
    assert (" " + previous.strip()).endswith(tokenizer.decode(context))


async def test_text_is_the_transcript_and_a_newline(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, data=form(response_format="text"), files=upload())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == SPOKEN.strip() + "\n"


async def test_segments_come_from_the_timestamp_tokens(
    http: httpx.AsyncClient, fake: FakeTriton, tokenizer: WhisperTokenizer
) -> None:
    fake.script.segment_end_s = 1.24
    headers = {"X-Request-Id": "a4"}
    body = (
        await http.post(
            URL,
            data=form(response_format="verbose_json", language="en"),
            files=upload(),
            headers=headers,
        )
    ).json()
    assert tokenizer.no_timestamps not in prompt_of(fake, "a4-w0")  # timestamps asked for
    assert body["task"] == "transcribe" and body["duration"] == SECONDS
    assert body["text"] == SPOKEN.strip()
    (segment,) = body["segments"]
    assert (segment["start"], segment["end"], segment["text"]) == (0.0, 1.24, SPOKEN)
    assert tokenizer.decode(segment["tokens"]) == SPOKEN
    srt = await http.post(URL, data=form(response_format="srt", language="en"), files=upload())
    assert srt.text == f"1\n00:00:00,000 --> 00:00:01,240\n{SPOKEN.strip()}\n"


async def test_a_translation_asks_whisper_to_translate(
    http: httpx.AsyncClient, fake: FakeTriton, tokenizer: WhisperTokenizer
) -> None:
    response = await http.post(
        "/v1/audio/translations",
        data=form(response_format="verbose_json", language="de"),
        files=upload(),
        headers={"X-Request-Id": "a5"},
    )
    assert response.json()["task"] == "translate" and response.json()["language"] == "english"
    assert tokenizer.special("<|translate|>") in prompt_of(fake, "a5-w0")


async def test_the_event_stream(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    response = await http.post(URL, data=form(stream="true", language="en"), files=upload())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_payloads(response.text)
    *deltas, done = events
    assert {e["type"] for e in deltas} == {"transcript.text.delta"}
    assert "".join(e["delta"] for e in deltas) == SPOKEN.strip()
    assert len(deltas) > 1  # streamed as it was decoded, not in one piece
    usage = done.pop("usage")
    assert done == {"type": "transcript.text.done", "text": SPOKEN.strip()}
    # OpenAI's schema allows only token usage in this event (a "duration" one fails it).
    assert TranscriptionTextDoneEvent.model_validate({**done, "usage": usage}).usage
    audio = math.ceil(SECONDS * 50)
    assert usage["type"] == "tokens" and usage["input_token_details"]["audio_tokens"] == audio
    assert usage["input_token_details"]["text_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["input_tokens"] == audio + usage["input_token_details"]["text_tokens"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert fake.requests[-1].scalar("streaming") is True


async def test_leaving_a_transcript_stream_cancels_its_triton_call(
    gateway: FakeGateway, fake: FakeTriton
) -> None:
    fake.script.hang_after = 4  # " ", "G", "r", "\xc3": two deltas ("G", "r"), then nothing
    body, headers = multipart(form(stream="true", language="en"), upload())
    call = AsgiCall(gateway.app, URL, body, headers | {"X-Request-Id": "a6"})
    task = asyncio.create_task(call.run())
    await call.wait_chunks(2)
    call.disconnect()
    await asyncio.wait_for(task, 5)
    assert await fake.wait_cancelled("a6-w0")
    assert "transcript.text.done" not in call.text


def input_audio(data: bytes = WAV) -> dict:
    audio = {"data": base64.b64encode(data).decode(), "format": "wav"}
    return {"type": "input_audio", "input_audio": audio}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_chat_request_to_a_speech_model_answers_the_transcript(
    http: httpx.AsyncClient, fake: FakeTriton, stream: bool
) -> None:
    content = [{"type": "text", "text": "ignored by a speech model"}, input_audio()]
    response = await http.post(
        "/v1/chat/completions", json=chat(content, "fake-whisper", stream=stream)
    )
    assert response.status_code == 200
    if stream:
        chunks = sse_payloads(response.text)[:-1]
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    else:
        body = response.json()
        text = body["choices"][0]["message"]["content"]
        window = fake.requests[-1]
        prompt = len(window.inputs["decoder_input_ids"].reshape(-1))
        completion = len(SPOKEN.encode())  # a byte vocabulary; end of text is not output
        assert body["usage"] == {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    assert text == SPOKEN.strip()


async def test_max_completion_tokens_caps_the_transcript(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    """vLLM's field on /v1/audio/*: honoured, never ignored (the window is asked for no more,
    and the relay stops at it)."""
    response = await http.post(
        URL, data=form(language="de", max_completion_tokens="4"), files=upload(),
        headers={"X-Request-Id": "cap"},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    text = response.json()["text"]
    assert 0 < len(text.encode()) <= 4 and SPOKEN.strip().startswith(text)
    assert fake.request("cap-w0").scalar("request_output_len") == 4


async def test_an_undecodable_upload_names_the_file_field(http: httpx.AsyncClient) -> None:
    response = await http.post(URL, data=form(), files=upload(b"RIFF" + bytes(200)))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "file"


@pytest.mark.parametrize(
    "strategy",
    [
        "auto",
        {"type": "server_vad"},
        {"type": "server_vad", "threshold": 0.4, "silence_duration_ms": 300},
        {"type": "server_vad", "prefix_padding_ms": 200},
    ],
)
async def test_chunking_strategy_auto_or_server_vad_from_the_openai_sdk(
    http: httpx.AsyncClient, strategy: Any
) -> None:
    client = AsyncOpenAI(base_url="http://gateway/v1", api_key="unused", http_client=http)
    result = await client.audio.transcriptions.create(
        model="fake-whisper", file=("speech.wav", WAV), chunking_strategy=strategy
    )
    assert result.text == SPOKEN.strip()


async def test_chunking_strategy_as_json_text_in_one_form_field(http: httpx.AsyncClient) -> None:
    strategy = '{"type": "server_vad", "threshold": 0.5}'
    response = await http.post(URL, data=form(chunking_strategy=strategy), files=upload())
    assert response.status_code == 200 and response.json()["text"] == SPOKEN.strip()
