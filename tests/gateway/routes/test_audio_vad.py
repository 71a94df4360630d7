"""chunking_strategy on /v1/audio/transcriptions with the real voice-activity detector (Silero,
``media/vad.py``) in front of the fake Whisper: the detector's pauses place the window cuts."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from tests.audio_samples import encode, spoken
from tests.fakes.triton import FakeTriton

URL = "/v1/audio/transcriptions"
RATE = 16_000


def _speech(seconds: float) -> np.ndarray:
    voice = spoken()
    return np.tile(voice, int(np.ceil(seconds * RATE / voice.size)))[: int(seconds * RATE)]


def _clip() -> bytes:
    """40 s: speech to 22 s, a 3 s pause of faint noise, speech, then 0.7 s of digital silence
    (the quietest moment by energy, but too short a pause for the detector), speech."""
    noise = 0.003 * np.random.default_rng(0).standard_normal(3 * RATE).astype(np.float32)
    parts = [_speech(22), noise, _speech(2), np.zeros(int(0.7 * RATE), np.float32), _speech(12.3)]
    return encode(np.concatenate(parts), "flac")


CLIP = _clip()


async def _window_starts(http: httpx.AsyncClient, **fields: str) -> list[float]:
    data = {"model": "fake-whisper", "response_format": "verbose_json", "language": "en", **fields}
    response = await http.post(URL, data=data, files={"file": ("long.flac", CLIP, "audio/flac")})
    assert response.status_code == 200, response.text
    return [segment["start"] for segment in response.json()["segments"]]


async def test_server_vad_cuts_in_the_detectors_pause(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.script.segment_end_s = 0.5
    quiet_point = await _window_starts(http)
    assert len(quiet_point) == 2 and 26.9 <= quiet_point[1] <= 27.8  # the digital silence
    for strategy in ("auto", json.dumps({"type": "server_vad"})):
        by_vad = await _window_starts(http, chunking_strategy=strategy)
        assert len(by_vad) == 2 and 22.7 <= by_vad[1] <= 24.8, strategy  # the 3 s pause


async def test_server_vad_settings_reach_the_detector(http: httpx.AsyncClient) -> None:
    # A 3 s silence_duration_ms hears no pause at all: the cut falls back to the quietest moment
    strategy = json.dumps({"type": "server_vad", "silence_duration_ms": 3000})
    starts = await _window_starts(http, chunking_strategy=strategy)
    assert 26.9 <= starts[1] <= 27.8


@pytest.mark.parametrize(
    ("strategy", "param"),
    [
        ({"type": "server_vad", "threshold": 2}, "chunking_strategy"),
        ({"type": "semantic_vad"}, "chunking_strategy"),
    ],
)
async def test_bad_strategies_are_400s_naming_the_field(
    http: httpx.AsyncClient, strategy: dict, param: str
) -> None:
    data = {"model": "fake-whisper", "chunking_strategy": json.dumps(strategy)}
    response = await http.post(URL, data=data, files={"file": ("a.flac", CLIP, "audio/flac")})
    assert response.status_code == 400
    assert response.json()["error"]["param"].startswith(param)
