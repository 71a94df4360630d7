"""OpenAI audio wire types: ``/v1/audio/transcriptions`` and ``/v1/audio/translations``.

Both are multipart forms; the route reads the form and validates its text fields here (the file
itself stays bytes). Array fields arrive as repeated ``name[]`` entries, as the OpenAI SDK sends
``timestamp_granularities[]``. No I/O and no logic beyond validation.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ResponseFormat = Literal["json", "text", "srt", "vtt", "verbose_json"]
Granularity = Literal["segment", "word"]
# Fields OpenAI defines for other models (diarization, gpt-4o-transcribe): refused, not ignored.
UNSUPPORTED_FIELDS = (
    "include",
    "known_speaker_names",
    "known_speaker_references",
    "keywords",
    "languages",
)


class ServerVad(BaseModel):
    """OpenAI's ``chunking_strategy: {"type": "server_vad", ...}`` (its SDK's
    ``ChunkingStrategyVadConfig``): the voice-activity detector's settings (``media/vad.py``),
    whose speech spans place the cuts of Whisper's windows in the pauses (``"auto"`` is the
    same with OpenAI's defaults: threshold 0.5, 300 ms padding, 500 ms silence)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["server_vad"]
    prefix_padding_ms: int | None = Field(None, ge=0, le=60_000)
    silence_duration_ms: int | None = Field(None, ge=0, le=60_000)
    threshold: float | None = Field(None, ge=0.0, le=1.0)


class TranscriptionRequest(BaseModel):
    """The form fields of a transcription (or, with ``task='translate'``, a translation)."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1)
    language: str | None = Field(None, max_length=32)
    prompt: str | None = Field(None, max_length=4096)
    temperature: float = Field(0.0, ge=0.0, le=1.0)
    response_format: ResponseFormat = "json"
    timestamp_granularities: list[Granularity] = Field(default_factory=list, max_length=2)
    stream: bool = False
    chunking_strategy: Literal["auto"] | ServerVad | None = None
    # vLLM's: the most tokens the transcript may have (None: the whole clip).
    max_completion_tokens: int | None = Field(None, ge=1, le=2**31 - 1)

    @field_validator("language", "prompt", "chunking_strategy", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("chunking_strategy", mode="before")
    @classmethod
    def _auto_or_server_vad(cls, value: object) -> object:
        """``"auto"``, or the object: from the SDK's ``chunking_strategy[type]`` fields (a
        dict, read by the form) or as JSON text in one field (``-F 'chunking_strategy={...}'``)."""
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError("an object must be valid JSON") from None
        if isinstance(value, dict):
            return value  # validated as ServerVad: a wrong field is named inside it
        if value is None or value == "auto":
            return value
        raise ValueError('must be "auto" or {"type": "server_vad", ...}')

    @property
    def wants_segments(self) -> bool:
        """Segment times are needed: subtitles, or verbose JSON."""
        return self.response_format in ("srt", "vtt", "verbose_json")
