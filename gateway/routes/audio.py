"""POST /v1/audio/transcriptions and /v1/audio/translations: form in, transcript out."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError

from gateway.errors import InvalidRequest, MediaDecodeError, UpstreamFailed
from gateway.families.whisper import Task
from gateway.observability.record import record_of
from gateway.pipeline.transcribe import (
    TranscriptionJob,
    decode_upload,
    prepare_transcription,
    transcribe,
)
from gateway.protocol.audio import UNSUPPORTED_FIELDS, TranscriptionRequest
from gateway.routes.form import read_form
from gateway.streaming import transcript as formats
from gateway.streaming.disconnect import ClientDisconnected, cancel_on_disconnect
from gateway.streaming.response import EventStreamResponse
from gateway.streaming.sse import first_item
from gateway.streaming.transcript import Transcript

router = APIRouter()

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_TEXT_FORMATS = {"text": formats.text_body, "srt": formats.srt_body, "vtt": formats.vtt_body}


@router.post("/v1/audio/transcriptions", response_model=None)
async def transcriptions(request: Request) -> Response:
    return await _serve(request, "transcribe")


@router.post("/v1/audio/translations", response_model=None)
async def translations(request: Request) -> Response:
    return await _serve(request, "translate")


def _validate(fields: dict) -> TranscriptionRequest:
    for name in UNSUPPORTED_FIELDS:
        if name in fields:
            raise InvalidRequest(
                f"'{name}' is not supported by this gateway's Whisper models",
                param=name,
                code="unsupported_parameter",
            )
    try:
        body = TranscriptionRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidRequest(f"{where}: {first.get('msg')}", param=where or None) from None
    if "word" in body.timestamp_granularities:
        raise InvalidRequest(
            "word timestamps are not supported (Triton's Whisper returns no attention weights)",
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
    return TranscriptionJob(task, body.language, body.prompt, body.temperature, timestamps)


async def _serve(request: Request, task: Task) -> Response:
    runtime = request.app.state.runtime
    record = record_of(request.state)
    form = await read_form(request, runtime.settings.server.max_body_bytes)
    body = _validate(form.fields)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    served = runtime.model(body.model)
    if served.config.family != "whisper":
        raise InvalidRequest(
            f"model '{body.model}' does not transcribe audio", param="model", code="invalid_model"
        )
    if form.file is None:
        raise InvalidRequest("the audio file is missing: send it as 'file'", param="file")
    if not form.file:
        raise MediaDecodeError("The audio is empty (0 bytes).", param="file")
    record.media_items = 1
    samples = await decode_upload(form.file, runtime)
    prepared = await prepare_transcription(served, _job(body, task), samples)
    events = transcribe(prepared, request.state.request_id, record, stream=body.stream)
    if body.stream:
        first = await first_item(events)  # type: ignore[arg-type]
        stream = formats.sse_events(first, events)  # type: ignore[arg-type]
        return EventStreamResponse(stream, SSE_HEADERS)
    try:
        result = await cancel_on_disconnect(request.receive, _last(events))
    except ClientDisconnected:
        return Response(status_code=499)  # nobody is listening; the work was cancelled
    return _response(result, body)


async def _last(events: AsyncIterator[str | Transcript]) -> Transcript:
    async for item in events:
        if isinstance(item, Transcript):
            return item
    raise UpstreamFailed("the transcription ended without a transcript")


def _response(result: Transcript, body: TranscriptionRequest) -> Response:
    if body.response_format == "json":
        return JSONResponse(formats.json_body(result))
    if body.response_format == "verbose_json":
        return JSONResponse(formats.verbose_body(result))
    text = _TEXT_FORMATS[body.response_format](result)
    media_type = "text/vtt" if body.response_format == "vtt" else "text/plain"
    return PlainTextResponse(text, media_type=media_type)
