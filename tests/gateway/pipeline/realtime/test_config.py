"""pipeline/realtime/config.py: session.update changes only what it carries."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.media.vad import TurnDetection
from gateway.pipeline.realtime.config import SERVER_VAD, SessionConfig
from gateway.protocol.realtime import TranscriptionSession


def update(config: SessionConfig, audio_input: dict[str, Any]) -> SessionConfig:
    session = {"type": "transcription", "audio": {"input": audio_input}}
    return config.updated(TranscriptionSession.model_validate(session))


def test_fields_not_sent_are_kept() -> None:
    config = SessionConfig(model="m", language="de", prompt="Hallo")
    config = update(config, {"turn_detection": {"type": "server_vad", "threshold": 0.7}})
    assert (config.model, config.language, config.prompt) == ("m", "de", "Hallo")
    assert config.turn_detection == TurnDetection(threshold=0.7)
    config = update(config, {"turn_detection": {"type": "server_vad", "silence_duration_ms": 900}})
    assert config.turn_detection == TurnDetection(threshold=0.7, silence_duration_ms=900)
    config = update(config, {"transcription": {"prompt": ""}})
    assert config.prompt is None and config.language == "de"


def test_null_turns_detection_off_and_it_can_come_back_with_defaults() -> None:
    config = update(SessionConfig(model="m"), {"turn_detection": None})
    assert config.turn_detection is None
    assert config.wire("sess_1")["audio"]["input"]["turn_detection"] is None
    config = update(config, {"turn_detection": {"type": "server_vad"}})
    assert config.turn_detection == SERVER_VAD


def test_the_wire_session_is_openais_shape() -> None:
    config = update(SessionConfig(model="m"), {"format": {"type": "audio/pcma"}})
    wire = config.wire("sess_1")
    assert wire["type"] == "transcription" and wire["id"] == "sess_1"
    audio = wire["audio"]["input"]
    assert audio["format"] == {"type": "audio/pcma"}
    assert audio["noise_reduction"] is None
    assert audio["transcription"] == {"model": "m", "language": None, "prompt": None}
    vad = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300}
    assert audio["turn_detection"] == {**vad, "silence_duration_ms": 500}


@pytest.mark.parametrize(
    "audio_input",
    [
        {"noise_reduction": {"type": "far_field"}},
        {"turn_detection": {"type": "semantic_vad", "eagerness": "low"}},
        {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}},
        {"transcription": {"keywords": ["gateway"]}},
        {"transcription": {"delay": "low"}},
    ],
)
def test_what_cannot_be_honoured_is_refused(audio_input: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest) as refused:
        update(SessionConfig(model="m"), audio_input)
    assert refused.value.code == "unsupported_parameter"


def test_a_speech_to_speech_session_is_refused() -> None:
    session = TranscriptionSession.model_validate({"type": "realtime", "instructions": "hi"})
    with pytest.raises(InvalidRequest) as refused:
        SessionConfig(model="m").updated(session)
    assert refused.value.code == "unsupported_session_type"
