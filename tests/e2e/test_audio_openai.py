"""Speech end to end: the official OpenAI SDK against the gateway in front of the real Triton.

The gateway here serves both reference Whisper contracts: ``reference-whisper`` (the
encoder-decoder ``tensorrt_llm`` contract, log-mel computed in the gateway) and
``reference-whisper-bls`` (NVIDIA's ``whisper_bls``), with a 120 s duration limit so a "too
long" upload stays small. The tiny model's text is meaningless; what is checked is the
contract: formats, streaming, windows and their timestamps, translations, chat, and errors.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator, Callable
from itertools import pairwise

import httpx
import openai
import pytest
import uvicorn
from openai import AsyncOpenAI

from gateway.app import create_app
from gateway.config import (
    REFERENCE_WHISPER,
    AudioSettings,
    EmbeddedSettings,
    MediaSettings,
    ServedModel,
    Settings,
)
from gateway.triton.embedded import EmbeddedTriton, free_loopback_port
from tests.audio_samples import encode, speech_like

pytestmark = pytest.mark.e2e

DIRECT, BLS = "reference-whisper", "reference-whisper-bls"
MAX_SECONDS = 120


def _settings(triton: EmbeddedTriton) -> Settings:
    models = [
        ServedModel(id=model_id, family="whisper", triton_model=name, triton_url=triton.grpc_url,
                    whisper=REFERENCE_WHISPER)
        for model_id, name in ((DIRECT, "reference_whisper"), (BLS, "reference_whisper_bls"))
    ]  # fmt: skip
    return Settings(
        models=models,
        embedded=EmbeddedSettings(enabled=False),
        media=MediaSettings(
            max_bytes=8 * 1024 * 1024, audio=AudioSettings(max_duration_s=MAX_SECONDS)
        ),
    )


@pytest.fixture(scope="module")
async def speech_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    """A gateway serving the two reference Whisper models, on a loopback port."""
    port = free_loopback_port()
    app = create_app(_settings(embedded_triton))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def client(speech_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{speech_url}/v1", api_key="unused", max_retries=0, timeout=180)


def clip(seconds: float, seed: int = 1, fmt: str = "mp3") -> tuple[str, bytes, str]:
    return (f"clip.{fmt}", encode(speech_like(seconds, seed), fmt), f"audio/{fmt}")


async def test_every_response_format(client: AsyncOpenAI) -> None:
    upload = clip(6.0)
    json_result = await client.audio.transcriptions.create(model=DIRECT, file=upload)
    assert json_result.text and json_result.text == json_result.text.strip()
    assert json_result.usage.type == "duration" and json_result.usage.seconds == 6
    text = await client.audio.transcriptions.create(
        model=DIRECT, file=upload, response_format="text"
    )
    assert text == json_result.text + "\n"  # greedy: the same words every time
    srt = await client.audio.transcriptions.create(model=DIRECT, file=upload, response_format="srt")
    assert re.match(r"1\n00:00:00,000 --> 00:00:0\d,\d{3}\n\S", srt)
    vtt = await client.audio.transcriptions.create(model=DIRECT, file=upload, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> ")
    verbose = await client.audio.transcriptions.create(
        model=DIRECT, file=upload, response_format="verbose_json",
        timestamp_granularities=["segment"],
    )  # fmt: skip
    assert verbose.task == "transcribe" and verbose.language == "english"
    assert verbose.duration == pytest.approx(6.0, abs=0.05)
    assert verbose.segments and verbose.segments[0].start == 0.0
    assert verbose.segments[-1].end <= verbose.duration


async def test_stream_emits_deltas_then_done(client: AsyncOpenAI) -> None:
    upload = clip(7.0, seed=2)
    whole = await client.audio.transcriptions.create(model=DIRECT, file=upload)
    stream = await client.audio.transcriptions.create(model=DIRECT, file=upload, stream=True)
    deltas: list[str] = []
    done = None
    async for event in stream:
        if event.type == "transcript.text.delta":
            deltas.append(event.delta)
        elif event.type == "transcript.text.done":
            done = event
    assert done is not None and len(deltas) > 1
    assert "".join(deltas) == done.text == whole.text
    assert done.usage is not None and done.usage.type == "tokens"
    details = done.usage.input_token_details
    assert details is not None and abs((details.audio_tokens or 0) - 7 * 50) <= 1  # 50/s
    assert done.usage.output_tokens > 0


async def test_95_s_clip_is_transcribed_in_windows_with_monotonic_timestamps(
    client: AsyncOpenAI,
) -> None:
    verbose = await client.audio.transcriptions.create(
        model=DIRECT, file=clip(95.0, seed=3, fmt="flac"), response_format="verbose_json"
    )
    segments = verbose.segments
    assert verbose.duration == pytest.approx(95.0, abs=0.05)
    assert len({s.seek for s in segments}) >= 4, "95 s needs at least four 30 s windows"
    for segment, following in pairwise(segments):
        assert segment.start <= segment.end <= following.start
    assert segments[0].start < 1.0 and segments[-1].end >= verbose.duration - 1.0
    covered = sum(s.end - s.start for s in segments)
    assert covered >= 0.9 * verbose.duration
    assert verbose.text == " ".join(s.text.strip() for s in segments)


async def test_bls_windows_stay_within_its_token_cap(client: AsyncOpenAI) -> None:
    srt = await client.audio.transcriptions.create(
        model=BLS, file=clip(25.0, seed=4, fmt="wav"), response_format="srt"
    )
    times = re.findall(r"(\d\d):(\d\d):(\d\d),(\d{3}) --> (\d\d):(\d\d):(\d\d),(\d{3})", srt)
    assert len(times) >= 3  # 25 s in windows of at most 10 s (50 tokens at 5 per second)
    ends = [int(m) * 60 + int(s) + int(ms) / 1000 for _, m, s, ms in (t[4:] for t in times)]
    assert ends[-1] == pytest.approx(25.0, abs=0.05)


async def test_direct_and_bls_agree_on_a_short_clip(client: AsyncOpenAI) -> None:
    """Gateway numpy log-mel (direct) and Hugging Face's in the BLS feed the same weights."""
    upload = clip(5.0, seed=5, fmt="wav")
    direct = await client.audio.transcriptions.create(model=DIRECT, file=upload, language="en")
    bls = await client.audio.transcriptions.create(model=BLS, file=upload)
    assert bls.text and direct.text.startswith(bls.text[:20])


async def test_translation(client: AsyncOpenAI) -> None:
    upload = clip(5.0, seed=6)
    plain = await client.audio.translations.create(model=DIRECT, file=upload)
    verbose = await client.audio.translations.create(
        model=DIRECT, file=upload, response_format="verbose_json"
    )
    assert plain.text and verbose.task == "translate" and verbose.language == "english"
    text = await client.audio.translations.create(model=DIRECT, file=upload, response_format="text")
    assert text == plain.text + "\n"
    transcript = await client.audio.transcriptions.create(model=DIRECT, file=upload)
    assert transcript.text != plain.text  # the task token steers the decoder


@pytest.mark.parametrize("fmt", ["wav", "mp3", "ogg", "flac", "webm", "m4a"])
async def test_every_container(client: AsyncOpenAI, fmt: str) -> None:
    result = await client.audio.transcriptions.create(model=DIRECT, file=clip(2.0, 7, fmt))
    assert result.usage.seconds in (2, 3)  # AAC adds priming samples


async def test_chat_with_input_audio_and_audio_url_answers_the_transcript(
    client: AsyncOpenAI,
) -> None:
    data = encode(speech_like(4.0, 8), "wav")
    transcript = await client.audio.transcriptions.create(
        model=DIRECT, file=("a.wav", data, "audio/wav")
    )
    b64 = base64.b64encode(data).decode()
    parts = [
        {"type": "text", "text": "Transcribe this."},
        {"type": "input_audio", "input_audio": {"data": b64, "format": "wav"}},
    ]
    answer = await client.chat.completions.create(
        model=DIRECT, messages=[{"role": "user", "content": parts}]
    )
    assert answer.choices[0].message.content == transcript.text
    assert answer.usage.completion_tokens > 0
    url_part = {"type": "audio_url", "audio_url": {"url": f"data:audio/wav;base64,{b64}"}}
    stream = await client.chat.completions.create(
        model=DIRECT, messages=[{"role": "user", "content": [url_part]}], stream=True
    )
    pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == transcript.text


BAD_UPLOADS: dict[str, tuple[Callable[[], bytes], str]] = {
    "corrupt.mp3": (lambda: b"ID3" + bytes(range(256)) * 40, "invalid_media"),
    "truncated.flac": (lambda: encode(speech_like(3.0, 9), "flac")[:300], "invalid_media"),
    "empty.wav": (lambda: b"", "invalid_media"),
    "long.mp3": (lambda: encode(speech_like(MAX_SECONDS + 10, 9), "mp3"), "media_too_large"),
    "picture.png": (lambda: b"\x89PNG\r\n\x1a\n" + bytes(500), "unsupported_media_type"),
    "notes.txt": (lambda: b"just some text, not audio\n" * 20, "unsupported_media_type"),
}


@pytest.mark.parametrize("name", list(BAD_UPLOADS))
async def test_bad_uploads_get_4xx_openai_errors(client: AsyncOpenAI, name: str) -> None:
    make, code = BAD_UPLOADS[name]
    with pytest.raises(openai.APIStatusError) as caught:
        await client.audio.transcriptions.create(model=DIRECT, file=(name, make(), "audio/mpeg"))
    assert caught.value.status_code == 400
    assert caught.value.body["code"] == code, caught.value.body


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"model": "nope"}, "model_not_found"),
        ({"model": DIRECT, "response_format": "srt", "stream": "true"}, "unsupported_parameter"),
        ({"model": DIRECT, "timestamp_granularities[]": "word"}, "unsupported_parameter"),
        ({"model": DIRECT, "language": "klingon"}, "unsupported_language"),
        ({"model": DIRECT, "temperature": "3"}, "invalid_request"),
        ({"model": BLS, "prompt": "Names: Ada, Grace."}, "unsupported_parameter"),
    ],
)
async def test_bad_fields_get_4xx_openai_errors(
    speech_url: str, fields: dict[str, str], code: str
) -> None:
    files = {"file": ("a.wav", encode(speech_like(1.0, 10), "wav"), "audio/wav")}
    async with httpx.AsyncClient(base_url=speech_url, timeout=60) as http:
        response = await http.post("/v1/audio/transcriptions", data=fields, files=files)
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"] == code


async def _whisper_tokens(triton: EmbeddedTriton) -> float:
    async with httpx.AsyncClient(trust_env=False) as http:
        text = (await http.get(f"http://127.0.0.1:{triton.metrics_port}/metrics")).text
    pattern = r'^mmgw_reference_generated_tokens_total\{model="reference_whisper"\} (\S+)$'
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_leaving_a_stream_cancels_the_windows_in_triton(
    speech_url: str, embedded_triton: EmbeddedTriton
) -> None:
    files = {"file": ("long.flac", encode(speech_like(95.0, 11), "flac"), "audio/flac")}
    fields = {"model": DIRECT, "stream": "true"}
    async with (
        httpx.AsyncClient(base_url=speech_url, timeout=60) as http,
        http.stream("POST", "/v1/audio/transcriptions", data=fields, files=files) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if "transcript.text.delta" in line:
                break
    await asyncio.sleep(1.0)
    settled = await _whisper_tokens(embedded_triton)
    await asyncio.sleep(1.0)
    assert await _whisper_tokens(embedded_triton) == settled, "windows kept decoding"
