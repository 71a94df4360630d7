"""OpenAI's Responses API: ``POST /v1/responses`` (on the chat skeleton), the stored
responses: ``GET`` and ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``,
and ``POST /v1/responses/input_tokens`` (what a request's prompt would count).

Stored responses belong to the API key that created them (``auth.key_id``); another key's
response is answered 404, as a missing one is.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.auth import key_id
from gateway.errors import InvalidRequest, NotFound, UpstreamFailed, echoed
from gateway.observability.record import record_of
from gateway.pipeline.relay import Prepared
from gateway.pipeline.responses_job import (
    ResponseJob,
    conversation,
    draft_response,
    echo,
    for_counting,
    prepare_response,
    stored,
)
from gateway.pipeline.responses_names import ResponsesNames
from gateway.protocol.responses import ResponsesRequest
from gateway.routes import background, background_stream, openapi
from gateway.routes.answer import Answer, Events, answer, relays
from gateway.routes.body import parse_body
from gateway.routes.state import RuntimeDep, name_fields
from gateway.runtime import Runtime
from gateway.store import StoredResponse
from gateway.streaming.response_events import ResponseBuilder, ResponseEvents, new_response_id

router = APIRouter()

MAX_LIST_LIMIT = 100  # OpenAI's bounds on input_items' limit
DEFAULT_LIST_LIMIT = 20


@router.post("/v1/responses", response_model=None, openapi_extra=openapi.RESPONSES)
async def create_response(request: Request, runtime: RuntimeDep) -> Response:
    record = record_of(request.state)
    body = await parse_body(request, ResponsesRequest, runtime.settings.server.max_body_bytes)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    builder = ResponseBuilder(new_response_id(), int(time.time()), echo(body))
    names = ResponsesNames()  # chat's field names in this request's errors, as it sent them
    name_fields(request, names)

    if body.background:  # prepared here (so a bad request is still a 400), run detached
        job = await _draft(body, runtime, request, builder, names)
        prepared = await _prepare(job, runtime)
        return await background.start(job, prepared, runtime, request.state.request_id, record)

    async def begin() -> Events:
        job = await _draft(body, runtime, request, builder, names)
        prepared = await _prepare(job, runtime)
        record.media_items = prepared[0].media_items
        events = relays(prepared, request.state.request_id, record)
        return stored(events, job, runtime.store)

    def json_body(whole: Answer) -> Response:
        assert builder.final is not None  # built when the outcome passed through ``stored``
        return JSONResponse(builder.final)

    return await answer(request, begin, ResponseEvents(builder) if body.stream else None, json_body)


@router.post("/v1/responses/input_tokens", response_model=None, openapi_extra=openapi.INPUT_TOKENS)
async def count_input_tokens(request: Request, runtime: RuntimeDep) -> Response:
    """The prompt tokens the same ``POST /v1/responses`` would have, counted by the engine
    itself: the request is prepared exactly as a create (instructions, a continued
    conversation from the shared store, tools, images) and prefilled with one output token,
    and the deployment's own ``num_input_tokens`` is answered. Exact for every family and
    tokenizer, including image tokens, at the cost of one prefill (which warms the KV cache
    for the request that follows); nothing is stored."""
    record = record_of(request.state)
    body = for_counting(
        await parse_body(request, ResponsesRequest, runtime.settings.server.max_body_bytes)
    )
    record.set_model(body.model, body.model in runtime.models)
    builder = ResponseBuilder(new_response_id(), int(time.time()), echo(body))
    names = ResponsesNames()  # chat's field names in this request's errors, as it sent them
    name_fields(request, names)

    async def begin() -> Events:
        job = await _draft(body, runtime, request, builder, names)
        contract = await runtime.model(body.model).get_contract()
        if not {"return_num_input_tokens", "num_input_tokens"} <= {
            *contract.inputs,
            *contract.outputs,
        }:
            raise InvalidRequest(
                f"model '{body.model}' does not report prompt token counts (its Triton model "
                "declares no return_num_input_tokens / num_input_tokens), so they cannot be "
                "counted",
                param="model", code="unsupported_model",
            )  # fmt: skip
        prepared = await _prepare(job, runtime)
        return relays(prepared, request.state.request_id, record)

    def json_body(whole: Answer) -> Response:
        counted = whole.total.usage.prompt_tokens
        if counted < 1:
            raise UpstreamFailed(
                "this deployment does not report its prompt token count (num_input_tokens)"
            )
        return JSONResponse({"object": "response.input_tokens", "input_tokens": counted})

    return await answer(request, begin, None, json_body)


async def _draft(
    body: ResponsesRequest,
    runtime: Runtime,
    request: Request,
    builder: ResponseBuilder,
    names: ResponsesNames,
) -> ResponseJob:
    """The request drafted as a chat request, against the runtime's models and store."""
    limit = runtime.settings.responses.max_stored_bytes
    scope = key_id(request.state)
    return await draft_response(body, runtime, runtime.store, limit, scope, builder, names)


async def _prepare(job: ResponseJob, runtime: Runtime) -> list[Prepared]:
    """The drafted job prepared for the model it names, with the runtime's services."""
    return await prepare_response(job, runtime.model(job.chat.model), runtime.preparation)


async def _stored(request: Request, runtime: Runtime, response_id: str) -> StoredResponse:
    found = await runtime.store.get(response_id, key_id(request.state))
    if found is None:
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    return found


@router.get("/v1/responses/{response_id}", response_model=None, openapi_extra=openapi.STORED)
async def get_response(request: Request, response_id: str, runtime: RuntimeDep) -> Response:
    if request.query_params.get("stream", "false").lower() not in ("false", "0"):
        return await background_stream.replay(
            runtime, response_id, key_id(request.state),
            request.query_params.get("starting_after"),
        )  # fmt: skip
    return JSONResponse(background.seen(await _stored(request, runtime, response_id), runtime))


@router.delete("/v1/responses/{response_id}", response_model=None, openapi_extra=openapi.STORED)
async def delete_response(request: Request, response_id: str, runtime: RuntimeDep) -> Response:
    if not await runtime.store.delete(response_id, key_id(request.state)):
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


@router.get(
    "/v1/responses/{response_id}/input_items",
    response_model=None,
    openapi_extra=openapi.INPUT_ITEMS,
)
async def list_input_items(request: Request, response_id: str, runtime: RuntimeDep) -> Response:
    """The items the response was generated from, as OpenAI lists them: those of the
    conversation it continued (inputs and outputs, as far back as they are stored), then its
    own input; newest first unless ``order=asc``."""
    order, limit, after = list_params(request)
    chain = await runtime.store.chain(response_id, key_id(request.state))
    if not chain:
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    items = [*conversation(chain[:-1]), *chain[-1].input_items]
    return JSONResponse(paged(items, order, limit, after))


def paged(items: list[dict[str, Any]], order: str, limit: int, after: str | None) -> dict[str, Any]:
    """One page of ``items`` (oldest first) as OpenAI lists them: in ``order``, after the
    item ``after``, at most ``limit``."""
    if order == "desc":
        items = items[::-1]
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise InvalidRequest(f"no item '{after}' in this list", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }


def list_params(request: Request) -> tuple[str, int, str | None]:
    """``order``, ``limit`` and ``after`` of a list request, checked; ``include`` refused
    unless it asks for what is always there (input images' URLs)."""
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
    raw: Any = query.get("limit", str(DEFAULT_LIST_LIMIT))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}", param="limit")
    for value in [*query.getlist("include"), *query.getlist("include[]")]:
        if value != "message.input_image.image_url":
            raise InvalidRequest(
                f"include value {value!r} is not supported", param="include",
                code="unsupported_parameter",
            )  # fmt: skip
    return order, int(raw), query.get("after")
