"""Transcript bodies (json, text, srt, vtt, verbose_json) and the streamed delta events."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import AsyncIterator

from openai.types.audio import TranscriptionTextDoneEvent

from gateway.errors import UpstreamFailed
from gateway.families.calls import Outcome, TimedSegment, Transcript
from gateway.families.events import Done, TextDelta
from gateway.protocol.common import UsageCounts
from gateway.streaming.sse import stream_events
from gateway.streaming.transcript import (
    TranscriptEvents,
    json_body,
    srt_body,
    text_body,
    timestamp,
    verbose_body,
    vtt_body,
)

HELLO = TextDelta("Hello")
TRANSCRIPT = Transcript(
    task="transcribe",
    language="english",
    duration=3725.25,
    text="Hello there. General Kenobi!",
    segments=(
        TimedSegment(0, 0, 0.0, 1.5, " Hello there.", (1, 2)),
        TimedSegment(1, 372000, 3721.04, 3725.25, " General Kenobi!", (3,)),
    ),
)


def test_timestamps_in_both_subtitle_styles() -> None:
    assert timestamp(3721.04, ",") == "01:02:01,040"
    assert timestamp(0.0005, ".") == "00:00:00.000"
    assert timestamp(59.9996, ".") == "00:01:00.000"


def test_srt_and_vtt() -> None:
    assert srt_body(TRANSCRIPT) == (
        "1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n"
        "2\n01:02:01,040 --> 01:02:05,250\nGeneral Kenobi!\n"
    )
    assert vtt_body(TRANSCRIPT) == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello there.\n\n"
        "01:02:01.040 --> 01:02:05.250\nGeneral Kenobi!\n"
    )


def test_json_text_and_verbose() -> None:
    assert json_body(TRANSCRIPT) == {
        "text": TRANSCRIPT.text,
        "usage": {"type": "duration", "seconds": 3726},
    }
    assert text_body(TRANSCRIPT) == TRANSCRIPT.text + "\n"
    verbose = verbose_body(TRANSCRIPT)
    assert verbose["task"] == "transcribe" and verbose["duration"] == 3725.25
    segment = verbose["segments"][1]
    assert segment["seek"] == 372000 and segment["start"] == 3721.04
    assert segment["tokens"] == [3] and segment["compression_ratio"] > 0
    assert {"avg_logprob", "no_speech_prob", "temperature"} <= segment.keys()


def _events(payloads: list[bytes]) -> list[dict]:
    return [json.loads(p.removeprefix(b"data: ")) for p in payloads]


async def _items(*items: object) -> AsyncIterator:
    for item in items:
        if isinstance(item, Exception):
            raise item
        yield TextDelta(item) if isinstance(item, str) else Done(item)


async def test_sse_deltas_then_done_with_openais_token_usage() -> None:
    transcript = dataclasses.replace(TRANSCRIPT, prompt_tokens=4, completion_tokens=9)
    events = _items(" there.", Outcome("stop", UsageCounts(4, 9), transcript))
    frames = [frame async for frame in stream_events(HELLO, events, TranscriptEvents())]
    *deltas, done = _events(frames)
    assert deltas == [
        {"type": "transcript.text.delta", "delta": "Hello"},
        {"type": "transcript.text.delta", "delta": " there."},
    ]
    audio = math.ceil(3725.25 * 50)  # Whisper's encoder: 50 positions a second
    assert done == {
        "type": "transcript.text.done",
        "text": TRANSCRIPT.text,
        "usage": {
            "type": "tokens",
            "input_tokens": audio + 4,
            "input_token_details": {"audio_tokens": audio, "text_tokens": 4},
            "output_tokens": 9,
            "total_tokens": audio + 13,
        },
    }
    # The only usage OpenAI's schema allows in this event ("duration" fails it).
    parsed = TranscriptionTextDoneEvent.model_validate(done)
    assert parsed.usage is not None and parsed.usage.total_tokens == audio + 13


async def test_an_error_after_the_first_byte_is_an_error_event() -> None:
    events = _items(UpstreamFailed("window 2 failed"))
    frames = [frame async for frame in stream_events(HELLO, events, TranscriptEvents())]
    assert _events(frames)[-1]["error"]["code"] == "upstream_failed"
