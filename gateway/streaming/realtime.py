"""The server events of a Realtime transcription session, as JSON objects.

Each is built field for field from openai-python 3.x's type of that event
(``openai/types/realtime/``): ``session_created_event.py`` / ``session_updated_event.py``,
``input_audio_buffer_committed_event.py``, ``..._cleared_event.py``,
``..._speech_started_event.py``, ``..._speech_stopped_event.py``,
``conversation_item_input_audio_transcription_{delta,completed,failed}_event.py`` and
``realtime_error_event.py``. Every server event has a fresh ``event_id``; an error repeats the
``event_id`` of the client event that caused it, as OpenAI's does.
"""

from __future__ import annotations

import uuid
from typing import Any

from gateway.errors import GatewayError

Event = dict[str, Any]


def new_id(prefix: str) -> str:
    """OpenAI-looking ids: ``event_…``, ``item_…``, ``sess_…``."""
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _event(kind: str, **fields: Any) -> Event:
    return {"type": kind, "event_id": new_id("event"), **fields}


def session_created(session: dict[str, Any]) -> Event:
    return _event("session.created", session=session)


def session_updated(session: dict[str, Any]) -> Event:
    return _event("session.updated", session=session)


def committed(item_id: str, previous_item_id: str | None) -> Event:
    return _event(
        "input_audio_buffer.committed", item_id=item_id, previous_item_id=previous_item_id
    )


def cleared() -> Event:
    return _event("input_audio_buffer.cleared")


def speech_started(item_id: str, audio_start_ms: int) -> Event:
    return _event(
        "input_audio_buffer.speech_started", item_id=item_id, audio_start_ms=audio_start_ms
    )


def speech_stopped(item_id: str, audio_end_ms: int) -> Event:
    return _event("input_audio_buffer.speech_stopped", item_id=item_id, audio_end_ms=audio_end_ms)


def transcription_delta(item_id: str, delta: str) -> Event:
    return _event(
        "conversation.item.input_audio_transcription.delta",
        item_id=item_id,
        content_index=0,
        delta=delta,
    )


def transcription_completed(item_id: str, transcript: str, seconds: float) -> Event:
    """``usage`` in OpenAI's duration form (``UsageTranscriptTextUsageDuration``), as
    ``whisper-1`` reports it: the seconds of audio transcribed."""
    return _event(
        "conversation.item.input_audio_transcription.completed",
        item_id=item_id,
        content_index=0,
        transcript=transcript,
        usage={"type": "duration", "seconds": round(seconds, 3)},
    )


def transcription_failed(item_id: str, error: GatewayError) -> Event:
    return _event(
        "conversation.item.input_audio_transcription.failed",
        item_id=item_id,
        content_index=0,
        error=_error_object(error),
    )


def error(error: GatewayError, event_id: str | None = None) -> Event:
    """``RealtimeErrorEvent``: the error object of the HTTP API plus the client's event id."""
    return _event("error", error={**_error_object(error), "event_id": event_id})


def _error_object(error: GatewayError) -> dict[str, Any]:
    body: dict[str, Any] = error.to_body()["error"]
    return body
