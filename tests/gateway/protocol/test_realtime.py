"""protocol/realtime.py takes every field openai-python's types give a transcription session's
client events (an SDK that adds one makes this fail, rather than the gateway refusing it as
unknown)."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types import realtime as openai_types
from openai.types.realtime import audio_transcription, realtime_audio_formats
from openai.types.realtime import realtime_transcription_session_audio_input as audio_input
from openai.types.realtime import (
    realtime_transcription_session_audio_input_turn_detection as turn_detection,
)

from gateway.protocol import realtime as ours

PAIRS: list[tuple[Any, Any]] = [
    (ours.SessionUpdate, openai_types.SessionUpdateEvent),
    (ours.TranscriptionSession, openai_types.RealtimeTranscriptionSessionCreateRequest),
    (ours.SessionAudio, openai_types.RealtimeTranscriptionSessionAudio),
    (ours.AudioInput, audio_input.RealtimeTranscriptionSessionAudioInput),
    (ours.NoiseReduction, audio_input.NoiseReduction),
    (ours.AudioTranscription, audio_transcription.AudioTranscription),
    (ours.ServerVad, turn_detection.ServerVad),
    (ours.SemanticVad, turn_detection.SemanticVad),
    (ours.AudioPCM, realtime_audio_formats.AudioPCM),
    (ours.AudioPCMU, realtime_audio_formats.AudioPCMU),
    (ours.AudioPCMA, realtime_audio_formats.AudioPCMA),
    (ours.AppendAudio, openai_types.InputAudioBufferAppendEvent),
    (ours.CommitAudio, openai_types.InputAudioBufferCommitEvent),
    (ours.ClearAudio, openai_types.InputAudioBufferClearEvent),
]  # fmt: skip


@pytest.mark.parametrize(("mine", "theirs"), PAIRS, ids=[t.__name__ for _, t in PAIRS])
def test_every_openai_field_is_known(mine: Any, theirs: Any) -> None:
    assert set(theirs.model_fields) <= set(mine.model_fields)


def test_the_sdks_own_transcription_session_parses() -> None:
    session = openai_types.RealtimeTranscriptionSessionCreateRequest.model_validate({
        "type": "transcription",
        "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "noise_reduction": None,
            "transcription": {"model": "whisper-1", "language": "en", "prompt": "hi"},
            "turn_detection": {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200,
                               "silence_duration_ms": 400, "create_response": False},
        }},
    })  # fmt: skip
    event = {"type": "session.update", "session": session.model_dump(exclude_unset=True)}
    parsed = ours.SessionUpdate.model_validate(event)
    assert parsed.session.audio.input.turn_detection.threshold == 0.6  # type: ignore[union-attr]
