"""``[realtime]``: what live transcription sessions (``/v1/realtime``) may hold, and for how long.

Every session costs memory for as long as it is open (its audio buffer, a voice-activity
detector while server VAD is on) and Triton work for each utterance, so each is bounded: the
sessions open at once (in all, and per API key), the audio one session may buffer (seconds,
and bytes of one append), the events waiting for a slow reader, and the time a silent
connection is kept.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RealtimeSettings(BaseModel):
    """``[realtime]``: the live transcription endpoint's bounds."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Serve /v1/realtime transcription sessions.")
    max_sessions: int = Field(256, ge=1, description="sessions open at once, in all")
    max_sessions_per_key: int = Field(
        32, ge=1, description="sessions open at once per API key (per client address without keys)"
    )
    max_buffer_s: float = Field(
        60.0, gt=0, le=600, description="audio one uncommitted buffer may hold, in seconds"
    )
    max_append_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="decoded audio bytes one input_audio_buffer.append may carry (OpenAI allows "
        "15 MiB; 60 s of 24 kHz PCM16 is 2.9 MB, and every message is read whole into memory)",
    )
    max_pending_utterances: int = Field(
        4, ge=1, description="committed utterances waiting for their transcript, per session"
    )
    max_pending_events: int = Field(
        1024,
        ge=16,
        description="server events waiting for a reader that does not read; past it the "
        "session is closed (1008) rather than holding Triton work for it",
    )
    idle_timeout_s: float = Field(
        120.0, gt=0, description="a session that sends nothing and awaits nothing is closed"
    )
