"""OpenAI's Conversations API: ``POST /v1/conversations``, ``GET``/``POST``/``DELETE
/v1/conversations/{id}``, ``GET``/``POST /v1/conversations/{id}/items``, ``GET``/``DELETE
/v1/conversations/{id}/items/{item_id}``.

A conversation belongs to the API key that created it (another key's is answered 404, as a
missing one is) and lives in the response store, so every gateway sharing the store serves it.
``POST /v1/responses`` with ``conversation`` reads its items as context and appends the
request's input and the response's output (``pipeline/responses_job.py``). Items are kept as sent
(an image's ``data:`` URL is its bytes), so the next turn's image has the same content id and
hits the KV cache.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.auth import key_id
from gateway.errors import NotFound, echoed
from gateway.location import Location
from gateway.pipeline.responses_input import normalise
from gateway.protocol.conversations import ConversationCreate, ConversationUpdate, ItemsCreate
from gateway.routes import openapi
from gateway.routes.body import parse_body
from gateway.routes.responses import list_params, paged
from gateway.routes.state import RuntimeDep, name_fields
from gateway.runtime import Runtime
from gateway.store import StoredConversation

router = APIRouter()
PATH = "/v1/conversations/{conversation_id}"


def _shown(conversation: StoredConversation) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "object": "conversation",
        "created_at": int(conversation.created_at),
        "metadata": conversation.metadata,
    }


def _missing(conversation_id: str) -> NotFound:
    return NotFound(
        f"No conversation with id {echoed(conversation_id)} was found", param="conversation_id"
    )


def as_items(at: Location) -> Location:
    """``errors.FieldNames`` of the conversation endpoints: the items they take are a
    Responses ``input`` (``normalise`` names them so) sent as ``items``."""
    return ("items", *at[1:]) if at[:1] == ("input",) else at


def _items(request: Request, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items as stored (each with an id), their refusals named ``items[i]``."""
    if not raw:
        return []
    name_fields(request, as_items)
    return normalise(raw)


async def _body(request: Request, runtime: Runtime, model: type[Any]) -> Any:
    return await parse_body(request, model, runtime.settings.server.max_body_bytes)


@router.post(
    "/v1/conversations", response_model=None,
    openapi_extra=openapi.with_body(ConversationCreate),
)  # fmt: skip
async def create_conversation(request: Request, runtime: RuntimeDep) -> Response:
    scope = key_id(request.state)
    body: ConversationCreate = await _body(request, runtime, ConversationCreate)
    items = _items(request, body.items or [])
    conversation = StoredConversation(
        f"conv_{secrets.token_hex(24)}", scope, time.time(), body.metadata or {}
    )
    await runtime.store.create_conversation(conversation, items)
    return JSONResponse(_shown(conversation))


@router.get(PATH, response_model=None, openapi_extra=openapi.CONVERSATIONS)
async def get_conversation(request: Request, conversation_id: str, runtime: RuntimeDep) -> Response:
    scope = key_id(request.state)
    found = await runtime.store.get_conversation(conversation_id, scope)
    if found is None:
        raise _missing(conversation_id)
    return JSONResponse(_shown(found))


@router.post(PATH, response_model=None, openapi_extra=openapi.with_body(ConversationUpdate))
async def update_conversation(
    request: Request, conversation_id: str, runtime: RuntimeDep
) -> Response:
    scope = key_id(request.state)
    body: ConversationUpdate = await _body(request, runtime, ConversationUpdate)
    updated = await runtime.store.set_metadata(conversation_id, scope, body.metadata)
    if updated is None:
        raise _missing(conversation_id)
    return JSONResponse(_shown(updated))


@router.delete(PATH, response_model=None, openapi_extra=openapi.CONVERSATIONS)
async def delete_conversation(
    request: Request, conversation_id: str, runtime: RuntimeDep
) -> Response:
    scope = key_id(request.state)
    if not await runtime.store.delete_conversation(conversation_id, scope):
        raise _missing(conversation_id)
    return JSONResponse({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


@router.post(f"{PATH}/items", response_model=None, openapi_extra=openapi.with_body(ItemsCreate))
async def add_items(request: Request, conversation_id: str, runtime: RuntimeDep) -> Response:
    scope = key_id(request.state)
    list_params(request)  # include is checked as for listing
    body: ItemsCreate = await _body(request, runtime, ItemsCreate)
    items = _items(request, body.items)
    if not await runtime.store.add_items(conversation_id, scope, items):
        raise _missing(conversation_id)
    return JSONResponse(
        {"object": "list", "data": items, "first_id": items[0]["id"],
         "last_id": items[-1]["id"], "has_more": False}
    )  # fmt: skip


@router.get(f"{PATH}/items", response_model=None, openapi_extra=openapi.CONVERSATIONS)
async def list_items(request: Request, conversation_id: str, runtime: RuntimeDep) -> Response:
    """The conversation's items, newest first unless ``order=asc``; ``after`` and ``limit``
    page them as ``input_items`` does."""
    scope = key_id(request.state)
    order, limit, after = list_params(request)
    items = await runtime.store.conversation_items(conversation_id, scope)
    if items is None:
        raise _missing(conversation_id)
    return JSONResponse(paged(items, order, limit, after))


@router.get(f"{PATH}/items/{{item_id}}", response_model=None, openapi_extra=openapi.CONVERSATIONS)
async def get_item(
    request: Request, conversation_id: str, item_id: str, runtime: RuntimeDep
) -> Response:
    scope = key_id(request.state)
    list_params(request)
    items = await runtime.store.conversation_items(conversation_id, scope)
    if items is None:
        raise _missing(conversation_id)
    for item in items:
        if item["id"] == item_id:
            return JSONResponse(item)
    raise NotFound(f"No item with id {echoed(item_id)} in this conversation", param="item_id")


@router.delete(
    f"{PATH}/items/{{item_id}}", response_model=None, openapi_extra=openapi.CONVERSATIONS
)
async def delete_item(
    request: Request, conversation_id: str, item_id: str, runtime: RuntimeDep
) -> Response:
    """The item removed; answered with the conversation, as OpenAI does."""
    scope = key_id(request.state)
    deleted = await runtime.store.delete_item(conversation_id, scope, item_id)
    if deleted is None:
        raise _missing(conversation_id)
    if not deleted:
        raise NotFound(f"No item with id {echoed(item_id)} in this conversation", param="item_id")
    found = await runtime.store.get_conversation(conversation_id, scope)
    if found is None:  # deleted in between
        raise _missing(conversation_id)
    return JSONResponse(_shown(found))
