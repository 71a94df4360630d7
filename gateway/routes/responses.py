"""OpenAI's Responses API: ``POST /v1/responses`` (on the chat skeleton), and the stored
responses: ``GET`` and ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``.

Stored responses belong to the API key that created them (``auth.key_id``); another key's
response is answered 404, as a missing one is.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.auth import key_id
from gateway.errors import InvalidRequest, NotFound, echoed
from gateway.observability.record import record_of
from gateway.pipeline.responses import (
    conversation,
    draft_response,
    echo,
    prepare_response,
    stored,
)
from gateway.protocol.responses import ResponsesRequest
from gateway.routes import openapi
from gateway.routes.answer import Answer, Events, answer, relays
from gateway.routes.body import parse_body
from gateway.runtime import Runtime
from gateway.store import StoredResponse
from gateway.streaming.responses import ResponseBuilder, ResponseEvents, new_response_id

router = APIRouter()

MAX_LIST_LIMIT = 100  # OpenAI's bounds on input_items' limit
DEFAULT_LIST_LIMIT = 20


@router.post("/v1/responses", response_model=None, openapi_extra=openapi.RESPONSES)
async def create_response(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    record = record_of(request.state)
    body = await parse_body(request, ResponsesRequest, runtime.settings.server.max_body_bytes)
    record.set_model(body.model, body.model in runtime.models)
    record.stream = body.stream
    builder = ResponseBuilder(new_response_id(), int(time.time()), echo(body))

    async def begin() -> Events:
        job = await draft_response(body, runtime, key_id(request.state), builder)
        prepared = await prepare_response(job, runtime)
        record.media_items = prepared[0].media_items
        events = relays(prepared, request.state.request_id, record)
        return stored(events, job, runtime)

    def json_body(whole: Answer) -> Response:
        assert builder.final is not None  # built when the outcome passed through ``stored``
        return JSONResponse(builder.final)

    return await answer(request, begin, ResponseEvents(builder) if body.stream else None, json_body)


async def _stored(request: Request, response_id: str) -> StoredResponse:
    runtime: Runtime = request.app.state.runtime
    found = await runtime.store.get(response_id, key_id(request.state))
    if found is None:
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    return found


@router.get("/v1/responses/{response_id}", response_model=None, openapi_extra=openapi.STORED)
async def get_response(request: Request, response_id: str) -> Response:
    if request.query_params.get("stream", "false").lower() not in ("false", "0"):
        raise InvalidRequest(
            "replaying a stored response as a stream is not supported", param="stream",
            code="unsupported_parameter",
        )  # fmt: skip
    return JSONResponse((await _stored(request, response_id)).response)


@router.delete("/v1/responses/{response_id}", response_model=None, openapi_extra=openapi.STORED)
async def delete_response(request: Request, response_id: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    if not await runtime.store.delete(response_id, key_id(request.state)):
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


@router.get(
    "/v1/responses/{response_id}/input_items",
    response_model=None,
    openapi_extra=openapi.INPUT_ITEMS,
)
async def list_input_items(request: Request, response_id: str) -> Response:
    """The items the response was generated from, as OpenAI lists them: those of the
    conversation it continued (inputs and outputs, as far back as they are stored), then its
    own input; newest first unless ``order=asc``."""
    order, limit, after = _list_params(request)
    runtime: Runtime = request.app.state.runtime
    chain = await runtime.store.chain(response_id, key_id(request.state))
    if not chain:
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    items = [*conversation(chain[:-1]), *chain[-1].input_items]
    if order == "desc":
        items = items[::-1]
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise InvalidRequest(f"no input item '{after}' in this response", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return JSONResponse(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )


def _list_params(request: Request) -> tuple[str, int, str | None]:
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
