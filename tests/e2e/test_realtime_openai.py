"""Live transcription end to end: the OpenAI SDK's realtime client against the gateway in front
of the real Triton's reference Whisper (the encoder-decoder contract). The tiny model writes
meaningless text, so the protocol is what is checked: events, their order, the transcript as
the deltas joined, server VAD on spoken audio, and a closed socket stopping Triton's decoding.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator

import numpy as np
import pytest
from openai import AsyncOpenAI
from websockets.asyncio.client import connect

from gateway.triton.embedded import EmbeddedTriton
from tests.audio_samples import pcm24k, speech_like, spoken
from tests.e2e.test_audio_openai import DIRECT, _settings, _whisper_tokens
from tests.live_gateway import serving

pytestmark = pytest.mark.e2e
CHUNK = 4800  # 100 ms of 24 kHz PCM16


@pytest.fixture(scope="module")
async def realtime_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    async with serving(_settings(embedded_triton)) as url:
        yield url


def chunks(audio: bytes) -> list[str]:
    return [
        base64.b64encode(audio[i : i + CHUNK * 2]).decode() for i in range(0, len(audio), CHUNK * 2)
    ]


async def test_turn_detection_off_commit_gets_deltas_and_their_join(realtime_url: str) -> None:
    client = AsyncOpenAI(base_url=f"{realtime_url}/v1", api_key="unused", max_retries=0)
    async with client.realtime.connect(model=DIRECT) as conn:
        assert (await conn.recv()).type == "session.created"
        session = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        await conn.session.update(session=session)  # type: ignore[arg-type]
        assert (await conn.recv()).type == "session.updated"
        for chunk in chunks(pcm24k(speech_like(2.0, seed=5))):
            await conn.input_audio_buffer.append(audio=chunk)
        await conn.input_audio_buffer.commit()
        committed = await asyncio.wait_for(conn.recv(), 60)
        assert committed.type == "input_audio_buffer.committed"
        deltas = []
        while (event := await asyncio.wait_for(conn.recv(), 60)).type.endswith(".delta"):
            deltas.append(event.delta)  # type: ignore[union-attr]
        assert event.type == "conversation.item.input_audio_transcription.completed"
        assert event.item_id == committed.item_id
        assert deltas and event.transcript == "".join(deltas)  # type: ignore[arg-type]
        assert event.usage.seconds == pytest.approx(2.0, abs=0.01)  # type: ignore[union-attr]


async def test_server_vad_commits_spoken_audio_by_itself(realtime_url: str) -> None:
    silence = np.zeros(16_000, np.float32)
    audio = pcm24k(np.concatenate([silence, spoken(), silence]))
    client = AsyncOpenAI(base_url=f"{realtime_url}/v1", api_key="unused", max_retries=0)
    async with client.realtime.connect(model=DIRECT) as conn:
        assert (await conn.recv()).type == "session.created"
        for chunk in chunks(audio):
            await conn.input_audio_buffer.append(audio=chunk)
        kinds = []
        while (event := await asyncio.wait_for(conn.recv(), 60)).type != (
            "conversation.item.input_audio_transcription.completed"
        ):
            kinds.append(event.type)
    assert kinds[:3] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
    ]


async def test_closing_mid_utterance_stops_triton_within_a_second(
    realtime_url: str, embedded_triton: EmbeddedTriton
) -> None:
    url = realtime_url.replace("http://", "ws://") + f"/v1/realtime?model={DIRECT}"
    async with connect(url) as ws:
        await ws.recv()
        session = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        for chunk in chunks(pcm24k(speech_like(55.0, seed=6))):  # two windows
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        while "transcription.delta" not in str(await asyncio.wait_for(ws.recv(), 60)):
            pass
    await asyncio.sleep(1.0)
    settled = await _whisper_tokens(embedded_triton)
    await asyncio.sleep(1.0)
    assert await _whisper_tokens(embedded_triton) == settled, "Triton kept decoding"
