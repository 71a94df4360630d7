"""A session's speech model: chosen and checked when configured, asked once per utterance.

An utterance is transcribed exactly as an uploaded file is, from its decoded samples on
(``pipeline/transcribe.prepare_samples`` -> ``relay``), so Whisper's windows, language guess,
prompt and streaming all apply; only the decoding differs (the session's PCM stream).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import numpy as np
from typing_extensions import assert_never

from gateway.errors import InvalidRequest
from gateway.families.base import SpeechOptions
from gateway.families.calls import Outcome, Sampling
from gateway.families.events import ChoiceDone, Done, ReasoningDelta, TextDelta, ToolCallPiece
from gateway.pipeline.realtime.config import SessionConfig
from gateway.pipeline.relay import relay
from gateway.pipeline.transcribe import TranscriptionJob, check_transcription, prepare_samples
from gateway.served import Models, ServedRuntime


def default_model(models: Mapping[str, ServedRuntime]) -> str | None:
    """The first served model that takes audio: a session that names none uses it."""
    for model_id, served in models.items():
        if served.family.accepts_audio:
            return model_id
    return None


def _job(config: SessionConfig) -> TranscriptionJob:
    return TranscriptionJob(
        SpeechOptions("transcribe", config.language, config.prompt), Sampling(temperature=0.0)
    )


def _served(models: Models, config: SessionConfig) -> ServedRuntime:
    if config.model is None:
        raise InvalidRequest(
            "no speech model is served: set session.audio.input.transcription.model",
            param="session.audio.input.transcription.model",
        )
    return models.model(config.model)  # ModelNotFound: 404 model_not_found


async def check(models: Models, config: SessionConfig) -> TranscriptionJob:
    """The model exists and transcribes, and takes the language and prompt: else a 4xx."""
    served = _served(models, config)
    try:
        return await check_transcription(served, _job(config))
    except InvalidRequest as exc:
        if exc.param in ("language", "prompt", "temperature"):
            raise exc.within(("session", "audio", "input", "transcription")) from exc
        raise


async def transcribe(
    models: Models, config: SessionConfig, samples: np.ndarray[Any, Any], request_id: str
) -> AsyncGenerator[str | Outcome, None]:
    """The utterance's text as Triton writes it (int16 ``samples`` at 16 kHz), then the
    ``Outcome``. Closing the iterator cancels the Triton requests."""
    served = _served(models, config)
    job = await check(models, config)
    audio = samples.astype(np.float32) / 32768.0
    prepared = await prepare_samples(served, job, audio, stream=True)
    events = relay(prepared, request_id)
    try:
        async for event in events:
            match event:
                case TextDelta(text):
                    yield text
                case Done(outcome):
                    yield outcome
                case ToolCallPiece() | ReasoningDelta() | ChoiceDone():  # none in a transcription
                    pass
                case _:
                    assert_never(event)
    finally:
        await events.aclose()
