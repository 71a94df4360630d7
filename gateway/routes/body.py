"""Read and validate a JSON body into a wire type, with OpenAI-style 4xx errors.

FastAPI's automatic body parsing answers 422 with ``{"detail": ...}``; OpenAI clients
expect 400 with an error object naming the offending parameter, so routes parse here.
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from gateway.errors import InvalidRequest, RequestTooLarge
from gateway.observability.record import record_of
from gateway.protocol.invalid import invalid_request

Model = TypeVar("Model", bound=BaseModel)


async def read_capped(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise RequestTooLarge(f"request body is over {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestTooLarge(f"request body is over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def parse_body(request: Request, model: type[Model], max_bytes: int) -> Model:
    raw = await read_capped(request, max_bytes)
    record_of(request.state).keep_body(raw)  # its size; the body itself only when debugging
    if not raw.strip():
        raise InvalidRequest("the request body is empty; expected a JSON object")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        if first.get("type") == "json_invalid":
            raise InvalidRequest(
                f"the request body is not valid JSON: {first.get('msg')}"
            ) from None
        raise invalid_request(exc) from None
