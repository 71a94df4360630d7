"""POST /v1/completions: OpenAI's legacy completions, on the same skeleton as chat."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.observability.record import record_of
from gateway.pipeline.completions import prepare_completion
from gateway.protocol.completions import CompletionRequest
from gateway.routes import openapi
from gateway.routes.answer import Answer, Events, answer, relays
from gateway.routes.body import parse_body
from gateway.routes.state import RuntimeDep
from gateway.streaming.completions import CompletionWriter, completion_body, new_completion_id

router = APIRouter()


@router.post("/v1/completions", response_model=None, openapi_extra=openapi.COMPLETIONS)
async def completions(request: Request, runtime: RuntimeDep) -> Response:
    record = record_of(request.state)
    body = await parse_body(request, CompletionRequest, runtime.settings.server.max_body_bytes)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    completion_id = new_completion_id()
    prompts = body.prompts or []
    # Choice i * n + j is prompt i's j-th: its echo is that prompt.
    echoed = [p for p in prompts for _ in range(body.n)] if body.echo else []

    async def begin() -> Events:
        prepared = await prepare_completion(body, runtime.model(body.model), runtime.preparation)
        return relays(prepared, request.state.request_id, record)

    choices = len(prompts) * body.n
    writer = CompletionWriter(
        completion_id, body.model, body.include_usage, echoed or [""] * choices
    )

    def json_body(whole: Answer) -> Response:
        texts = (
            [echo + text for echo, text in zip(echoed, whole.texts, strict=True)]
            if echoed
            else whole.texts
        )
        reasons = [o.finish_reason for o in whole.outcomes]
        tokens = whole.tokens if body.logprobs is not None else None
        offsets = [len(echo) for echo in echoed]
        usage = whole.total.usage
        return JSONResponse(
            completion_body(completion_id, body.model, texts, reasons, usage, tokens, offsets)
        )

    return await answer(request, begin, writer if body.stream else None, json_body)
