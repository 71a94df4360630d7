"""The app's OpenAPI document: the request bodies the routes read themselves, and the errors.

The routes parse their own bodies (``body.py``, ``form.py``) so that a bad one is an OpenAI-style
400, not FastAPI's 422; FastAPI therefore sees no body parameter and would declare none. Each
route states its body here instead, through ``openapi_extra``, from the same pydantic models
that validate it; ``build`` registers those models (and their ``$defs``) under
``components/schemas``. Every failure is declared as what it is on the wire, one OpenAI error
object (``ErrorResponse``), and FastAPI's 422 is dropped: the app answers validation errors 400.
Nothing here changes how a request is parsed.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from gateway.protocol.audio import TranscriptionRequest
from gateway.protocol.chat import ChatCompletionRequest
from gateway.protocol.completions import CompletionRequest
from gateway.protocol.responses import ResponsesRequest

__all__ = [
    "CHAT_COMPLETIONS",
    "COMPLETIONS",
    "CONVERSATIONS",
    "INPUT_ITEMS",
    "INPUT_TOKENS",
    "RESPONSES",
    "STORED",
    "TRANSCRIPTION",
    "build",
    "errors",
    "with_body",
]

_REF = "#/components/schemas/{model}"
_SCHEMAS: dict[str, dict[str, Any]] = {}  # what build() adds to components/schemas


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """Every non-2xx answer of the API: exactly one OpenAI error object."""

    error: ErrorDetail


def _register(name: str, schema: dict[str, Any]) -> dict[str, str]:
    """Add ``schema`` (and its ``$defs``) to the components; a ``$ref`` to it."""
    for def_name, definition in schema.pop("$defs", {}).items():
        _register(def_name, definition)
    if _SCHEMAS.setdefault(name, schema) != schema:
        raise RuntimeError(f"two different OpenAPI schemas are named {name!r}")
    return {"$ref": _REF.format(model=name)}


def _model(model: type[BaseModel]) -> dict[str, str]:
    return _register(model.__name__, model.model_json_schema(ref_template=_REF))


_ERROR = {"application/json": {"schema": _model(ErrorResponse)}}
_WHY = {
    400: "The request is invalid: a field or a media part (`invalid_request_error`)",
    401: "Missing or wrong API key (`authentication_error`), when keys are configured",
    404: "No served model has that id (`model_not_found`), or no stored response has (`not_found`)",
    413: "The body is over the server's `max_body_bytes` (`request_too_large`)",
    429: "Too many requests in flight (`rate_limit_exceeded`); retry after `Retry-After`; or "
    "this API key's stored responses are at their quota (`store_quota_exceeded`)",
    500: "A bug in the gateway (`internal_error`)",
    502: "Triton accepted the request, then reported an error (`upstream_failed`)",
    503: "Triton is not serving (`upstream_unavailable`), a media decoding worker failed "
    "(`media_worker_failed`), or the response store cannot be reached "
    "(`store_unavailable`), with `Retry-After`; retry later",
    507: "The response store is full (`store_full`): its total cap or its disk",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entries of these error statuses, each an OpenAI error object."""
    return {str(status): {"description": _WHY[status], "content": _ERROR} for status in statuses}


_GENERATION_ERRORS = errors(400, 401, 404, 413, 429, 500, 502, 503, 507)


def _events(data: str) -> dict[str, Any]:
    """An event stream's schema: before OpenAPI 3.2's ``itemSchema``, ``schema`` describes
    one event (its fields as the SSE format names them)."""
    return {
        "schema": {
            "type": "object",
            "required": ["data"],
            "properties": {"data": {"type": "string", "description": data}},
        }
    }


def _transcription_form() -> dict[str, Any]:
    """The multipart form: the text fields as ``TranscriptionRequest`` validates them (never
    null: a form field is sent or left out), arrays as repeated ``name[]`` fields (as the
    OpenAI SDK sends them), and the audio ``file``."""
    schema = TranscriptionRequest.model_json_schema(ref_template=_REF)
    properties = schema["properties"]
    # In a form, the object is JSON text in one field (the SDK writes chunking_strategy[type]).
    properties["chunking_strategy"] = {
        "type": "string",
        "title": "Chunking Strategy",
        "description": '"auto", or {"type": "server_vad", "threshold": ..., '
        '"prefix_padding_ms": ..., "silence_duration_ms": ...} as JSON',
    }
    schema.get("$defs", {}).pop("ServerVad", None)
    for field in properties.values():  # a form has no null: a field is sent or not
        choices = field.pop("anyOf", None)
        if choices is not None:
            (kept,) = [choice for choice in choices if choice != {"type": "null"}]
            field.update(kept)
            if field.get("default", "") is None:
                del field["default"]
    properties["timestamp_granularities[]"] = properties.pop("timestamp_granularities")
    properties["file"] = {
        "type": "string",
        "format": "binary",
        "description": "The audio file (any container and codec FFmpeg's allowlist takes).",
    }
    schema["required"] = ["file", *schema.get("required", [])]
    schema["title"] = "TranscriptionForm"
    return _register("TranscriptionForm", schema)


CHAT_COMPLETIONS: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _model(ChatCompletionRequest)}},
    },
    "responses": {
        "200": {
            "description": "A `chat.completion` object, or with `stream: true` an event "
            "stream of `chat.completion.chunk` objects ending with `data: [DONE]`",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": _events("a `chat.completion.chunk` as JSON, or `[DONE]`"),
            },
        },
        **_GENERATION_ERRORS,
    },
}

COMPLETIONS: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _model(CompletionRequest)}},
    },
    "responses": {
        "200": {
            "description": "A `text_completion` object, or with `stream: true` an event "
            "stream of `text_completion` chunks ending with `data: [DONE]`",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": _events("a `text_completion` chunk as JSON, or `[DONE]`"),
            },
        },
        **_GENERATION_ERRORS,
    },
}

RESPONSES: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _model(ResponsesRequest)}},
    },
    "responses": {
        "200": {
            "description": "A `response` object, or with `stream: true` an event stream: "
            "`response.created`, `response.in_progress`, output item and text events, then "
            "`response.completed` (`response.incomplete`, `response.failed`)",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": _events("a Responses API event as JSON"),
            },
        },
        **_GENERATION_ERRORS,
    },
}

_STORED_ERRORS = errors(400, 401, 404, 500, 503)

STORED: dict[str, Any] = {
    "responses": {
        "200": {
            "description": "The stored `response` object (deleted: `{id, object, deleted}`)",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **_STORED_ERRORS,
    },
}

CONVERSATIONS: dict[str, Any] = {
    "responses": {
        "200": {
            "description": "A `conversation` object, a conversation item, a `list` of items, "
            'or `{id, object: "conversation.deleted", deleted}`, as OpenAI\'s Conversations '
            "API answers",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **errors(400, 401, 404, 413, 429, 500, 503, 507),
    },
}


def with_body(model: type[BaseModel]) -> dict[str, Any]:
    """A Conversations operation whose request body is ``model``."""
    body = {"required": True, "content": {"application/json": {"schema": _model(model)}}}
    return {"requestBody": body, **CONVERSATIONS}


INPUT_TOKENS: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _model(ResponsesRequest)}},
    },
    "responses": {
        "200": {
            "description": '`{object: "response.input_tokens", input_tokens}`: the prompt '
            "tokens the same `POST /v1/responses` would have, counted by the engine",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **errors(400, 401, 404, 413, 429, 500, 502, 503),
    },
}

INPUT_ITEMS: dict[str, Any] = {
    "responses": {
        "200": {
            "description": "The response's own input items: a `list` with `data`, `first_id`, "
            "`last_id`, `has_more`",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **_STORED_ERRORS,
    },
}

TRANSCRIPTION: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": _transcription_form()}},
    },
    "responses": {
        "200": {
            "description": "The transcript in `response_format`: `json` and `verbose_json` as "
            "JSON, `text` and `srt` as plain text, `vtt` as WebVTT; with `stream: true` an "
            "event stream of `transcript.text.delta` events, then `transcript.text.done`",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/plain": {"schema": {"type": "string"}},
                "text/vtt": {"schema": {"type": "string"}},
                "text/event-stream": _events(
                    "a `transcript.text.delta` or `transcript.text.done` event as JSON"
                ),
            },
        },
        **_GENERATION_ERRORS,
    },
}


def build(app: FastAPI) -> dict[str, Any]:
    """The document ``/openapi.json`` serves (built once): FastAPI's, with the request body
    models under ``components/schemas`` and no 422 (a bad parameter is answered 400)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=app.openapi_version,
        description=app.description,
        routes=app.routes,
    )
    for path in document.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault("400", errors(400)["400"])
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for name, schema in _SCHEMAS.items():
        if schemas.setdefault(name, schema) != schema:
            raise RuntimeError(f"two different OpenAPI schemas are named {name!r}")
    app.openapi_schema = document
    return document
