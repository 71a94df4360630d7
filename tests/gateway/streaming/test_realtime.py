"""streaming/realtime.py: every server event validates against openai-python's own type of it
(pydantic validation, stricter than the SDK's parsing, which constructs without checking)."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types import realtime as types

from gateway.errors import InvalidRequest, UpstreamFailed
from gateway.pipeline.realtime.config import SessionConfig
from gateway.streaming import realtime as events

SESSION = SessionConfig(model="whisper", language="en").wire("sess_1")

CASES: list[tuple[Any, dict[str, Any]]] = [
    (types.SessionCreatedEvent, events.session_created(SESSION)),
    (types.SessionUpdatedEvent, events.session_updated(SESSION)),
    (types.InputAudioBufferCommittedEvent, events.committed("item_2", "item_1")),
    (types.InputAudioBufferCommittedEvent, events.committed("item_1", None)),
    (types.InputAudioBufferClearedEvent, events.cleared()),
    (types.InputAudioBufferSpeechStartedEvent, events.speech_started("item_1", 700)),
    (types.InputAudioBufferSpeechStoppedEvent, events.speech_stopped("item_1", 4300)),
    (types.ConversationItemInputAudioTranscriptionDeltaEvent,
     events.transcription_delta("item_1", "Hello")),
    (types.ConversationItemInputAudioTranscriptionCompletedEvent,
     events.transcription_completed("item_1", "Hello there.", 3.0625)),
    (types.ConversationItemInputAudioTranscriptionFailedEvent,
     events.transcription_failed("item_1", UpstreamFailed("Triton failed"))),
    (types.RealtimeErrorEvent, events.error(InvalidRequest("bad", param="audio"), "evt_9")),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "event"), CASES, ids=[e["type"] for _, e in CASES])
def test_each_event_is_valid_as_openai_types_it(kind: Any, event: dict[str, Any]) -> None:
    parsed = kind.model_validate(event)
    assert parsed.type == event["type"] and parsed.event_id.startswith("event_")
    assert not (set(event) - set(kind.model_fields)), "a field OpenAI's type does not have"


def test_the_session_is_a_transcription_session() -> None:
    parsed = types.SessionCreatedEvent.model_validate(events.session_created(SESSION))
    assert isinstance(parsed.session, types.RealtimeTranscriptionSessionCreateRequest)
    audio_input = parsed.session.audio.input  # type: ignore[union-attr]
    assert audio_input.transcription.model == "whisper"  # type: ignore[union-attr]
    assert audio_input.turn_detection.type == "server_vad"  # type: ignore[union-attr]


def test_completed_usage_is_the_duration_form() -> None:
    event = events.transcription_completed("item_1", "Hi.", 1.23456)
    parsed = types.ConversationItemInputAudioTranscriptionCompletedEvent.model_validate(event)
    assert parsed.usage.type == "duration" and parsed.usage.seconds == 1.235  # type: ignore[union-attr]


def test_an_error_repeats_the_client_event_id() -> None:
    parsed = types.RealtimeErrorEvent.model_validate(events.error(InvalidRequest("x"), "c1"))
    assert parsed.error.event_id == "c1" and parsed.error.type == "invalid_request_error"
