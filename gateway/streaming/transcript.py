"""Transcripts on the wire: json, text, srt, vtt, verbose_json, and streamed text deltas.

The bodies follow OpenAI's audio API. ``verbose_json`` segments carry what the gateway knows:
times from the timestamp tokens, text, token ids, the compression ratio (zlib, as Whisper
computes it); ``avg_logprob`` and ``no_speech_prob`` need the model's logits, which Triton's
Whisper does not return, so they are 0.0. A stream is ``transcript.text.delta`` events then
one ``transcript.text.done`` (OpenAI's events, which its SDK parses); an error after the first
byte is an ``error`` data event, as for chat.
"""

from __future__ import annotations

import json
import logging
import math
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import GatewayError, UpstreamFailed
from gateway.streaming.chunks import sse_frame

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimedSegment:
    """One segment of the whole clip (times in seconds from its start)."""

    id: int
    seek: int  # the window's start, in 10 ms mel frames (Whisper's ``seek``)
    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """What a transcription or translation produced, ready to be written in any format."""

    task: str
    language: str
    duration: float
    text: str
    segments: Sequence[TimedSegment] = field(default_factory=tuple)
    prompt_tokens: int = 0  # decoder prompt tokens sent, over all windows
    completion_tokens: int = 0  # tokens the decoder wrote, over all windows


def usage(duration: float) -> dict[str, Any]:
    """OpenAI's duration usage (whole seconds, rounded up)."""
    return {"type": "duration", "seconds": math.ceil(duration)}


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


def delta_event(text: str) -> bytes:
    return sse_frame({"type": "transcript.text.delta", "delta": text})


def done_event(transcript: Transcript) -> bytes:
    return sse_frame(
        {
            "type": "transcript.text.done",
            "text": transcript.text,
            "usage": usage(transcript.duration),
        }
    )


def error_event(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


async def sse_events(
    first: str | Transcript, events: AsyncIterator[str | Transcript]
) -> AsyncIterator[bytes]:
    """Delta events, then the done event; an error after the first byte as an error event.
    Closing this generator (the client left) closes ``events``, which cancels the windows."""
    try:
        item: str | Transcript | None = first
        while item is not None:
            if isinstance(item, Transcript):
                yield done_event(item)
                break
            if item:
                yield delta_event(item)
            item = await anext(events, None)
    except GatewayError as exc:
        yield error_event(exc.to_body())
    except Exception as exc:  # the response has started: report, never hang
        log.exception("transcript stream failed")
        yield error_event(UpstreamFailed(f"the stream failed: {type(exc).__name__}").to_body())
    finally:
        await events.aclose()


class StrippedDeltas:
    """Deltas of a text that must come out stripped at both ends, pieces joined by one space.

    Leading whitespace is dropped; trailing whitespace is held back until more text follows
    (so the deltas joined equal the final, stripped text). ``separate()`` marks where a new
    window starts: one space, emitted only if text came before and comes after.
    """

    def __init__(self) -> None:
        self._held = ""
        self._started = False
        self._at_boundary = True

    def feed(self, piece: str) -> str:
        if self._at_boundary:
            piece = piece.lstrip()
            if not piece:
                return ""
            self._at_boundary = False
        buffer = self._held + piece
        body = buffer.rstrip()
        self._held = buffer[len(body) :]
        self._started = self._started or bool(body)
        return body

    def separate(self) -> None:
        """A new piece (window) starts: its leading whitespace goes, one space joins it."""
        self._at_boundary = True
        self._held = " " if self._started else ""
