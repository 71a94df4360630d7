"""POST /v1/chat/completions: parse, prepare, relay, answer."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.observability.record import record_of
from gateway.pipeline.chat import prepare_chat
from gateway.protocol.chat import ChatCompletionRequest
from gateway.routes import openapi
from gateway.routes.answer import Answer, Events, answer, relays
from gateway.routes.body import parse_body
from gateway.routes.state import RuntimeDep
from gateway.streaming.chunks import ChunkWriter, completion_body, new_completion_id

router = APIRouter()


@router.post("/v1/chat/completions", response_model=None, openapi_extra=openapi.CHAT_COMPLETIONS)
async def chat_completions(request: Request, runtime: RuntimeDep) -> Response:
    record = record_of(request.state)
    body = await parse_body(request, ChatCompletionRequest, runtime.settings.server.max_body_bytes)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    completion_id = new_completion_id()

    async def begin() -> Events:
        prepared = await prepare_chat(body, runtime.model(body.model), runtime.preparation)
        record.media_items = prepared[0].media_items
        return relays(prepared, request.state.request_id, record)

    legacy = body.functions is not None  # the deprecated API answers with function_call
    writer = ChunkWriter(
        completion_id,
        body.model,
        include_usage=body.include_usage,
        choices=body.n,
        legacy_functions=legacy,
    )

    def json_body(whole: Answer) -> Response:
        reasons = [o.finish_reason for o in whole.outcomes]
        usage = whole.total.usage
        tokens = whole.tokens if body.logprobs else None
        calls = whole.tool_calls
        texts, thoughts = whole.texts, whole.reasoning
        chat = completion_body(
            completion_id, body.model, texts, reasons, usage, tokens, calls, legacy, thoughts
        )
        return JSONResponse(chat)

    return await answer(request, begin, writer if body.stream else None, json_body)
