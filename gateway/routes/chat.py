"""POST /v1/chat/completions: parse, prepare, then answer as JSON or as an SSE stream."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway.pipeline.chat import Outcome, prepare_chat, relay
from gateway.protocol.chat import ChatCompletionRequest
from gateway.routes.body import parse_body
from gateway.streaming.chunks import ChunkWriter, completion_body, new_completion_id
from gateway.streaming.sse import first_item, sse_events

router = APIRouter()

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request) -> Response:
    runtime = request.app.state.runtime
    body = await parse_body(request, ChatCompletionRequest, runtime.settings.server.max_body_bytes)
    prepared = await prepare_chat(body, runtime)
    completion_id = new_completion_id()
    request_id = request.state.request_id
    events = relay(prepared, request_id)
    if body.stream:
        first = await first_item(events)
        writer = ChunkWriter(completion_id, body.model)
        stream = sse_events(first, events, writer, body.include_usage)
        return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
    texts: list[str] = []
    outcome: Outcome | None = None
    async for item in events:
        if isinstance(item, Outcome):
            outcome = item
        else:
            texts.append(item)
    assert outcome is not None
    return JSONResponse(
        completion_body(
            completion_id, body.model, "".join(texts), outcome.finish_reason, outcome.usage
        )
    )
