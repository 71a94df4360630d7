"""The chat page's microphone button in Chromium, against the gateway and the reference Whisper.

Chromium's fake capture device plays a recorded WAV (silence, 3 s of speech, silence, looped)
as the microphone. The page streams it to /v1/realtime (the API key as OpenAI's browser
subprotocol); the server's VAD finds the utterance and the transcript lands in the message
box. The reference Whisper's words are meaningless, so the WebSocket traffic and the text's
path are what is checked.
"""

from __future__ import annotations

import base64
import json
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.triton.embedded import EmbeddedTriton
from tests.audio_samples import spoken
from tests.e2e.chromium import LAUNCH_ARGS, ensure_chromium
from tests.e2e.test_audio_openai import _settings
from tests.live_gateway import serving

playwright_api = pytest.importorskip(
    "playwright.async_api", reason="playwright is not installed: pip install -e '.[dev]'"
)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
KEY = "sk-mic-test"


def microphone_wav(path: Path) -> Path:
    rate = 16_000
    quiet = np.zeros(rate, np.float32)
    samples = np.concatenate([quiet, spoken(), quiet, quiet])
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((samples * 32767).astype("<i2").tobytes())
    return path


@pytest.fixture(scope="module")
async def mic_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    settings = _settings(embedded_triton).model_copy(update={"api_keys": (KEY,)})
    async with serving(settings) as url:
        yield url


@pytest.fixture
async def mic_browser(tmp_path: Path) -> AsyncIterator[Any]:
    path, reason = ensure_chromium()
    if path is None:
        pytest.skip(f"browser tests skipped: {reason}")
    args = [
        *LAUNCH_ARGS,
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-audio-capture={microphone_wav(tmp_path / 'mic.wav')}",
        "--autoplay-policy=no-user-gesture-required",
    ]
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(path), args=args)
        try:
            yield browser
        finally:
            await browser.close()


async def test_the_microphone_button_dictates_into_the_message_box(
    mic_browser: Any, mic_url: str
) -> None:
    page = await mic_browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    sockets: list[Any] = []
    sent: list[dict] = []
    received: list[dict] = []

    def on_socket(socket: Any) -> None:
        sockets.append(socket)
        socket.on("framesent", lambda frame: sent.append(json.loads(frame)))
        socket.on("framereceived", lambda frame: received.append(json.loads(frame)))

    page.on("websocket", on_socket)
    await page.goto(mic_url + "/")
    await page.fill("#api-key", KEY)
    await page.click("#mic")
    await page.wait_for_selector("#mic[aria-pressed=true]")
    await page.wait_for_function(
        "() => Number(document.getElementById('mic').dataset.utterances || 0) >= 1",
        timeout=120_000,
    )
    await page.click("#mic")  # stop
    await page.wait_for_selector("#mic[aria-pressed=false]")
    prompt = await page.input_value("#prompt")

    assert "/v1/realtime?intent=transcription" in sockets[0].url
    kinds = [event["type"] for event in received]
    assert kinds[0] == "session.created"
    assert (
        kinds.index("input_audio_buffer.speech_started")
        < kinds.index("input_audio_buffer.speech_stopped")
        < kinds.index("input_audio_buffer.committed")
        < kinds.index("conversation.item.input_audio_transcription.completed")
    )
    assert "error" not in kinds, [e for e in received if e["type"] == "error"]
    appends = [e for e in sent if e["type"] == "input_audio_buffer.append"]
    assert len(appends) >= 10
    assert len(base64.b64decode(appends[0]["audio"])) == 4800  # 100 ms of 24 kHz PCM16
    first = next(
        e for e in received
        if e["type"] == "conversation.item.input_audio_transcription.completed"
    )  # fmt: skip
    assert first["transcript"] and prompt.startswith(first["transcript"])
    assert not errors, errors
