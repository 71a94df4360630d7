"""A transcription session's configuration: OpenAI's defaults, ``session.update`` merged in.

``session.update`` changes only the fields it carries (``openai/types/realtime/
session_update_event.py``: "Only the fields that are present ... are updated"; ``null`` turns
``turn_detection`` off). What this gateway cannot honour is refused by name, never ignored:
noise reduction (no filter runs before the detector), ``semantic_vad`` (no turn model),
``idle_timeout_ms`` (it makes a model respond, and nothing responds here), logprobs, and the
transcription options of OpenAI's own models (``delay``, ``keywords``, ``languages``).
The result is checked against the served model's family (language, prompt) before it is
taken, so a bad update leaves the session as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gateway.errors import InvalidRequest
from gateway.media.pcm import PcmFormat
from gateway.media.vad import TurnDetection
from gateway.protocol.realtime import AudioInput, AudioPCM, ServerVad, TranscriptionSession

SERVER_VAD = TurnDetection()  # OpenAI's defaults: threshold 0.5, 300 ms padding, 500 ms silence


def _unsupported(param: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"'{param}' is not supported: {why}", param=param,
                          code="unsupported_parameter")  # fmt: skip


@dataclass(frozen=True)
class SessionConfig:
    """What one session transcribes with, and how its turns are found."""

    model: str | None  # a served speech model id; None: not chosen yet
    language: str | None = None
    prompt: str | None = None
    format: PcmFormat = "audio/pcm"
    turn_detection: TurnDetection | None = SERVER_VAD
    # server_vad's flags about model responses: kept and echoed, nothing responds here
    vad_flags: tuple[tuple[str, bool], ...] = ()

    def updated(self, session: TranscriptionSession) -> SessionConfig:
        """This configuration with ``session``'s fields taken (or refused)."""
        if session.type != "transcription":
            raise InvalidRequest(
                "this endpoint serves transcription sessions: send session.type "
                "'transcription' (speech-to-speech 'realtime' sessions are not served)",
                param="session.type",
                code="unsupported_session_type",
            )
        if session.include:
            raise _unsupported("session.include", "the speech models report no logprobs")
        audio_input = session.audio.input if session.audio is not None else None
        if audio_input is None:
            return self
        return self._with_input(audio_input)

    def _with_input(self, given: AudioInput) -> SessionConfig:
        fields = given.model_fields_set
        config = self
        if "noise_reduction" in fields and given.noise_reduction is not None:
            raise _unsupported(
                "session.audio.input.noise_reduction", "no noise filter runs here; send null"
            )
        if given.format is not None:
            fmt = given.format.type or "audio/pcm"
            if isinstance(given.format, AudioPCM) and given.format.rate not in (None, 24000):
                raise _unsupported("session.audio.input.format.rate", "PCM is 24000 Hz")
            config = replace(config, format=fmt)
        if given.transcription is not None:
            config = config._with_transcription(given.transcription.model_dump(exclude_unset=True))
        if "turn_detection" in fields:
            config = config._with_turns(given.turn_detection)
        return config

    def _with_transcription(self, fields: dict[str, Any]) -> SessionConfig:
        for name in ("delay", "keywords", "languages"):
            if fields.get(name) is not None:
                raise _unsupported(
                    f"session.audio.input.transcription.{name}",
                    "an option of OpenAI's own transcription models",
                )
        config = self
        if "model" in fields:
            config = replace(config, model=fields["model"])
        if "language" in fields:
            config = replace(config, language=fields["language"] or None)
        if "prompt" in fields:
            config = replace(config, prompt=fields["prompt"] or None)
        return config

    def _with_turns(self, given: Any) -> SessionConfig:
        if given is None:
            return replace(self, turn_detection=None, vad_flags=())
        if not isinstance(given, ServerVad):
            raise _unsupported(
                "session.audio.input.turn_detection.type",
                "semantic_vad needs a turn model; use server_vad or null",
            )
        if given.idle_timeout_ms is not None:
            raise _unsupported(
                "session.audio.input.turn_detection.idle_timeout_ms",
                "it asks a model to respond, and transcription sessions have none",
            )
        base = self.turn_detection or TurnDetection()
        turns = TurnDetection(
            threshold=base.threshold if given.threshold is None else given.threshold,
            prefix_padding_ms=(
                base.prefix_padding_ms
                if given.prefix_padding_ms is None
                else given.prefix_padding_ms
            ),
            silence_duration_ms=(
                base.silence_duration_ms
                if given.silence_duration_ms is None
                else given.silence_duration_ms
            ),
        )
        flags = dict(self.vad_flags)
        for name in ("create_response", "interrupt_response"):
            value = getattr(given, name)
            if value is not None:
                flags[name] = value
        return replace(self, turn_detection=turns, vad_flags=tuple(sorted(flags.items())))

    def wire(self, session_id: str) -> dict[str, Any]:
        """The session object of ``session.created`` / ``session.updated``
        (``RealtimeTranscriptionSessionCreateResponse``'s fields)."""
        audio_format: dict[str, Any] = {"type": self.format}
        if self.format == "audio/pcm":
            audio_format["rate"] = 24000
        turns: dict[str, Any] | None = None
        if self.turn_detection is not None:
            turns = {
                "type": "server_vad",
                "threshold": self.turn_detection.threshold,
                "prefix_padding_ms": self.turn_detection.prefix_padding_ms,
                "silence_duration_ms": self.turn_detection.silence_duration_ms,
                **dict(self.vad_flags),
            }
        return {
            "type": "transcription",
            "object": "realtime.transcription_session",
            "id": session_id,
            "audio": {
                "input": {
                    "format": audio_format,
                    "noise_reduction": None,
                    "transcription": {
                        "model": self.model,
                        "language": self.language,
                        "prompt": self.prompt,
                    },
                    "turn_detection": turns,
                }
            },
            "include": None,
        }
