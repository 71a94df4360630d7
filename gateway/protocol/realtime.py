"""OpenAI Realtime wire types for transcription sessions (``/v1/realtime``).

The client events a transcription session takes and the session object, field for field as
openai-python 3.x types them (``openai/types/realtime/``: ``session_update_event.py``,
``realtime_transcription_session_create_request.py``, ``..._audio_input.py``,
``..._audio_input_turn_detection.py``, ``audio_transcription.py``,
``realtime_audio_formats.py``, ``input_audio_buffer_{append,commit,clear}_event.py``).
Unknown fields are refused (``extra="forbid"``): a misspelt option must not be silently
ignored. Fields OpenAI defines for its own models (``delay``, ``keywords``, ``languages``,
logprobs, ``semantic_vad``, noise reduction) parse here and are refused by the session with a
named ``unsupported_parameter``. No I/O and no logic beyond validation.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

IncludeOption = Literal["item.input_audio_transcription.logprobs"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AudioPCM(_Wire):
    """``audio/pcm``: 16-bit little-endian mono; the type allows 24 kHz only."""

    type: Literal["audio/pcm"] | None = None
    rate: Literal[24000] | None = None


class AudioPCMU(_Wire):
    type: Literal["audio/pcmu"]


class AudioPCMA(_Wire):
    type: Literal["audio/pcma"]


AudioFormat = AudioPCM | AudioPCMU | AudioPCMA


class NoiseReduction(_Wire):
    type: Literal["near_field", "far_field"] | None = None
    strength: float | None = None


class AudioTranscription(_Wire):
    model: str | None = Field(None, max_length=256)
    language: str | None = Field(None, max_length=32)
    prompt: str | None = Field(None, max_length=4096)
    delay: Literal["minimal", "low", "medium", "high", "xhigh"] | None = None
    keywords: list[str] | None = None
    languages: list[str] | None = None


class ServerVad(_Wire):
    type: Literal["server_vad"]
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    prefix_padding_ms: int | None = Field(None, ge=0, le=60_000)
    silence_duration_ms: int | None = Field(None, ge=0, le=60_000)
    create_response: bool | None = None
    interrupt_response: bool | None = None
    idle_timeout_ms: int | None = None


class SemanticVad(_Wire):
    type: Literal["semantic_vad"]
    eagerness: Literal["low", "medium", "high", "auto"] | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None


TurnDetection = Annotated[ServerVad | SemanticVad, Field(discriminator="type")]


class AudioInput(_Wire):
    format: AudioFormat | None = None
    noise_reduction: NoiseReduction | None = None
    transcription: AudioTranscription | None = None
    turn_detection: TurnDetection | None = None


class SessionAudio(_Wire):
    input: AudioInput | None = None


class TranscriptionSession(_Wire):
    """``RealtimeTranscriptionSessionCreateRequest``: what ``session.update`` carries. A
    ``"realtime"`` (speech-to-speech) session is parsed loosely only to refuse it by name."""

    type: Literal["transcription", "realtime"]
    audio: SessionAudio | None = None
    include: list[IncludeOption] | None = None
    model_config = ConfigDict(extra="allow")  # a realtime session's own fields: refused later


class SessionUpdate(_Wire):
    type: Literal["session.update"]
    session: TranscriptionSession
    event_id: str | None = Field(None, max_length=512)


class AppendAudio(_Wire):
    type: Literal["input_audio_buffer.append"]
    audio: str
    event_id: str | None = Field(None, max_length=512)


class CommitAudio(_Wire):
    type: Literal["input_audio_buffer.commit"]
    event_id: str | None = Field(None, max_length=512)


class ClearAudio(_Wire):
    type: Literal["input_audio_buffer.clear"]
    event_id: str | None = Field(None, max_length=512)


ClientEvent = Annotated[
    SessionUpdate | AppendAudio | CommitAudio | ClearAudio, Field(discriminator="type")
]
CLIENT_EVENT_TYPES = frozenset(
    {"session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
     "input_audio_buffer.clear"}
)  # fmt: skip
# Client events of a speech-to-speech session: known to OpenAI, refused here by name.
CONVERSATION_EVENT_TYPES = frozenset(
    {"conversation.item.create", "conversation.item.retrieve", "conversation.item.truncate",
     "conversation.item.delete", "response.create", "response.cancel",
     "output_audio_buffer.clear"}
)  # fmt: skip


def event_type_of(payload: Any) -> str | None:
    """The ``type`` of a decoded client event, when it has a string one."""
    if isinstance(payload, dict) and isinstance(payload.get("type"), str):
        return str(payload["type"])
    return None
