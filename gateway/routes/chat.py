"""POST /v1/chat/completions: parse, prepare, then answer as JSON or as an SSE stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.errors import UpstreamFailed
from gateway.observability.record import record_of
from gateway.pipeline.chat import Outcome, prepare_chat, relay
from gateway.protocol.chat import ChatCompletionRequest
from gateway.routes.body import parse_body
from gateway.streaming.chunks import ChunkWriter, completion_body, new_completion_id
from gateway.streaming.disconnect import ClientDisconnected, cancel_on_disconnect
from gateway.streaming.response import EventStreamResponse
from gateway.streaming.sse import first_item, sse_events

router = APIRouter()

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request) -> Response:
    runtime = request.app.state.runtime
    record = record_of(request.state)
    body = await parse_body(request, ChatCompletionRequest, runtime.settings.server.max_body_bytes)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    prepared = await prepare_chat(body, runtime)
    record.media_items = prepared.media_items
    completion_id = new_completion_id()
    request_id = request.state.request_id
    events = relay(prepared, request_id, record)
    if body.stream:
        first = await first_item(events)
        writer = ChunkWriter(completion_id, body.model)
        stream = sse_events(first, events, writer, body.include_usage)
        return EventStreamResponse(stream, SSE_HEADERS)
    try:
        text, outcome = await cancel_on_disconnect(request.receive, collect(events))
    except ClientDisconnected:
        return Response(status_code=499)  # nobody is listening; the work was cancelled
    return JSONResponse(
        completion_body(completion_id, body.model, text, outcome.finish_reason, outcome.usage)
    )


async def collect(events: AsyncIterator[str | Outcome]) -> tuple[str, Outcome]:
    """The whole answer of a non-streamed request."""
    texts: list[str] = []
    async for item in events:
        if isinstance(item, Outcome):
            return "".join(texts), item
        texts.append(item)
    raise UpstreamFailed("the generation ended without an outcome")
