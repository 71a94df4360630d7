"""POST /v1/audio/transcriptions and /v1/audio/translations: form in, transcript out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError

from gateway.errors import InvalidRequest, MediaDecodeError, UpstreamFailed
from gateway.families.base import SpeechOptions
from gateway.families.calls import Sampling, Task, Transcript
from gateway.media.vad import TurnDetection, VadUnavailable, vad_available
from gateway.observability.record import record_of
from gateway.pipeline.realtime.config import SERVER_VAD
from gateway.pipeline.relay import relay
from gateway.pipeline.transcribe import (
    TranscriptionJob,
    check_transcription,
    prepare_transcription,
)
from gateway.protocol.audio import UNSUPPORTED_FIELDS, ServerVad, TranscriptionRequest
from gateway.protocol.invalid import invalid_request
from gateway.routes import openapi
from gateway.routes.answer import Answer, Events, answer
from gateway.routes.form import read_form
from gateway.routes.state import RuntimeDep
from gateway.runtime import Runtime
from gateway.streaming import transcript as formats

router = APIRouter()

_TEXT_FORMATS = {"text": formats.text_body, "srt": formats.srt_body, "vtt": formats.vtt_body}


@router.post("/v1/audio/transcriptions", response_model=None, openapi_extra=openapi.TRANSCRIPTION)
async def transcriptions(request: Request, runtime: RuntimeDep) -> Response:
    return await _serve(request, runtime, "transcribe")


@router.post("/v1/audio/translations", response_model=None, openapi_extra=openapi.TRANSCRIPTION)
async def translations(request: Request, runtime: RuntimeDep) -> Response:
    return await _serve(request, runtime, "translate")


def _validate(fields: dict[str, Any]) -> TranscriptionRequest:
    for name in UNSUPPORTED_FIELDS:
        if name in fields:
            raise InvalidRequest(
                f"'{name}' is not supported by this gateway's speech models",
                param=name,
                code="unsupported_parameter",
            )
    try:
        body = TranscriptionRequest.model_validate(fields)
    except ValidationError as exc:  # ServerVad: the union member pydantic tried, not a field
        raise invalid_request(exc, tags=frozenset({ServerVad.__name__})) from None
    if "word" in body.timestamp_granularities:
        raise InvalidRequest(
            "word timestamps are not supported (Triton's speech models return no attention "
            "weights)",
            param="timestamp_granularities",
            code="unsupported_parameter",
        )
    if body.stream and body.response_format not in ("json", "text"):
        raise InvalidRequest(
            "stream=true works with response_format json or text",
            param="stream",
            code="unsupported_parameter",
        )
    return body


def _job(body: TranscriptionRequest, task: Task) -> TranscriptionJob:
    timestamps = body.wants_segments or "segment" in body.timestamp_granularities
    speech = SpeechOptions(task, body.language, body.prompt, timestamps, body.max_completion_tokens)
    return TranscriptionJob(speech, Sampling(temperature=body.temperature), _chunking(body))


def _chunking(body: TranscriptionRequest) -> TurnDetection | None:
    """``chunking_strategy`` as the detector's settings: ``"auto"`` is server_vad with OpenAI's
    defaults (the quiet-point cuts where the detector is not installed); an explicit
    ``server_vad`` object needs the detector."""
    strategy = body.chunking_strategy
    if strategy is None:
        return None
    if strategy == "auto":
        return SERVER_VAD if vad_available() else None
    if not vad_available():
        raise VadUnavailable(
            "chunking_strategy server_vad needs the voice-activity detector, which is not "
            'installed: install multimodal-gateway[vad], or send "auto"',
            param="chunking_strategy",
        )
    given = {k: v for k, v in strategy.model_dump().items() if k != "type" and v is not None}
    try:
        return replace(SERVER_VAD, **given)
    except InvalidRequest as exc:
        raise exc.within(("chunking_strategy",)) from exc


async def _serve(request: Request, runtime: Runtime, task: Task) -> Response:
    record = record_of(request.state)
    form = await read_form(request, runtime.settings.server.max_body_bytes)
    body = _validate(form.fields)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    served = runtime.model(body.model)
    job = await check_transcription(served, _job(body, task))
    if form.file is None:
        raise InvalidRequest("the audio file is missing: send it as 'file'", param="file")
    if not form.file:
        raise MediaDecodeError("The audio is empty (0 bytes).", param="file")
    record.media_items = 1
    upload = form.file

    async def begin() -> Events:
        prepared = await prepare_transcription(
            served, job, upload, runtime.preparation.media, body.stream
        )
        return relay(prepared, request.state.request_id, record)

    def transcript_body(whole: Answer) -> Response:
        if whole.total.transcript is None:
            raise UpstreamFailed("the transcription ended without a transcript")
        return _response(whole.total.transcript, body)

    stream = formats.TranscriptEvents() if body.stream else None
    return await answer(request, begin, stream, transcript_body)


def _response(result: Transcript, body: TranscriptionRequest) -> Response:
    if body.response_format == "json":
        return JSONResponse(formats.json_body(result))
    if body.response_format == "verbose_json":
        return JSONResponse(formats.verbose_body(result))
    text = _TEXT_FORMATS[body.response_format](result)
    media_type = "text/vtt" if body.response_format == "vtt" else "text/plain"
    return PlainTextResponse(text, media_type=media_type)
