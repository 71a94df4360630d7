"""Transcripts on the wire: json, text, srt, vtt, verbose_json, and streamed text deltas.

The bodies follow OpenAI's audio API. ``verbose_json`` segments carry what the gateway knows:
times from the timestamp tokens, text, token ids, the compression ratio (zlib, as OpenAI's
reference computes it); ``avg_logprob`` and ``no_speech_prob`` need the model's logits, which
Triton's speech deployments do not return, so they are 0.0. A stream is ``transcript.text.delta``
events then one ``transcript.text.done`` (OpenAI's events, which its SDK parses), written by
``sse.py`` like every other stream.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

from typing_extensions import assert_never

from gateway.families.calls import Outcome, TimedSegment, Transcript
from gateway.families.events import ChoiceDone, ReasoningDelta, TextDelta, ToolCallPiece
from gateway.streaming.chunks import sse_frame

# Whisper's encoder positions per second of audio: 100 log-mel frames a second (hop 160 at
# 16 kHz), halved by its second convolution's stride (1,500 positions per 30-s window).
AUDIO_TOKENS_PER_SECOND = 50


def usage(duration: float) -> dict[str, Any]:
    """OpenAI's duration usage (whole seconds, rounded up)."""
    return {"type": "duration", "seconds": math.ceil(duration)}


def token_usage(transcript: Transcript | None) -> dict[str, Any]:
    """OpenAI's token usage, the only shape its ``transcript.text.done`` event allows
    (``openai.types.audio.TranscriptionTextDoneEvent.usage``: ``type: "tokens"``): the audio
    as the encoder positions it fills, the decoder's prompt as text tokens."""
    if transcript is None:
        audio = text = output = 0
    else:
        audio = math.ceil(transcript.duration * AUDIO_TOKENS_PER_SECOND)
        text, output = transcript.prompt_tokens, transcript.completion_tokens
    return {
        "type": "tokens",
        "input_tokens": audio + text,
        "input_token_details": {"audio_tokens": audio, "text_tokens": text},
        "output_tokens": output,
        "total_tokens": audio + text + output,
    }


def json_body(transcript: Transcript) -> dict[str, Any]:
    return {"text": transcript.text, "usage": usage(transcript.duration)}


def text_body(transcript: Transcript) -> str:
    return transcript.text + "\n"


def compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return round(len(data) / len(zlib.compress(data)), 4) if data else 0.0


def _segment(segment: TimedSegment) -> dict[str, Any]:
    return {
        "id": segment.id,
        "seek": segment.seek,
        "start": round(segment.start, 2),
        "end": round(segment.end, 2),
        "text": segment.text,
        "tokens": list(segment.tokens),
        "temperature": 0.0,
        "avg_logprob": 0.0,
        "compression_ratio": compression_ratio(segment.text),
        "no_speech_prob": 0.0,
    }


def verbose_body(transcript: Transcript) -> dict[str, Any]:
    return {
        "task": transcript.task,
        "language": transcript.language,
        "duration": round(transcript.duration, 2),
        "text": transcript.text,
        "segments": [_segment(s) for s in transcript.segments],
        "usage": usage(transcript.duration),
    }


def timestamp(seconds: float, marker: str) -> str:
    """``HH:MM:SS,mmm`` (SubRip: marker ",") or ``HH:MM:SS.mmm`` (WebVTT: ".")."""
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{marker}{millis:03d}"


def srt_body(transcript: Transcript) -> str:
    cues = [
        f"{n}\n{timestamp(s.start, ',')} --> {timestamp(s.end, ',')}\n{s.text.strip()}\n"
        for n, s in enumerate(transcript.segments, start=1)
    ]
    return "\n".join(cues)


def vtt_body(transcript: Transcript) -> str:
    cues = [
        f"{timestamp(s.start, '.')} --> {timestamp(s.end, '.')}\n{s.text.strip()}\n"
        for s in transcript.segments
    ]
    return "WEBVTT\n\n" + "\n".join(cues)


class TranscriptEvents:
    """The event format of a streamed transcription, for ``sse.stream_events``."""

    start = b""
    done = b""  # OpenAI's transcription stream has no [DONE] sentinel

    def content(self, event: TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone) -> bytes:
        match event:
            case TextDelta(text):
                return sse_frame({"type": "transcript.text.delta", "delta": text})
            case ToolCallPiece() | ReasoningDelta() | ChoiceDone():  # one choice, no tools
                raise TypeError(f"a transcript cannot carry {type(event).__name__}")
            case _:
                assert_never(event)

    def finish(self, outcome: Outcome) -> bytes:
        transcript = outcome.transcript
        text = transcript.text if transcript is not None else ""
        return sse_frame(
            {"type": "transcript.text.done", "text": text, "usage": token_usage(transcript)}
        )
