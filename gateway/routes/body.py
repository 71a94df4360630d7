"""Read and validate a JSON body into a wire type, with OpenAI-style 4xx errors.

FastAPI's automatic body parsing answers 422 with ``{"detail": ...}``; OpenAI clients
expect 400 with an error object naming the offending parameter, so routes parse here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from gateway.errors import InvalidRequest, RequestTooLarge
from gateway.observability.record import record_of

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


# Location items pydantic adds for the member of a union it tried ("str",
# "list[tagged-union[...]]"): they name a Python type, not a field of the request.
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|list|dict|none)$|\[")


def _location(loc: tuple[Any, ...]) -> str:
    """``messages[0].content[1].image_url.url``: union members left out, and a tagged union's
    tag (which pydantic repeats before the field of the same name) said once."""
    parts: list[str] = []
    previous: Any = None
    for item in loc:
        if isinstance(item, str) and (_UNION_MEMBER.search(item) or item == previous):
            continue
        previous = item
        parts.append(f"[{item}]" if isinstance(item, int) else ("." if parts else "") + str(item))
    return "".join(parts)


def _describe(errors: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The most specific problem (the union member that got furthest), as (where, message);
    union members that fail at the same place are joined with "or"."""
    deepest = max(len(error["loc"]) for error in errors)
    chosen = next(error for error in errors if len(error["loc"]) == deepest)
    where = _location(chosen["loc"])
    same_place = [e for e in errors if _location(e["loc"]) == where]
    messages = list(dict.fromkeys(str(e.get("msg")) for e in same_place))
    message = " or ".join(messages)
    # Failures at a place enclosing this one are the union's other members failing too.
    others = len({w for e in errors if not where.startswith(w := _location(e["loc"]))})
    if others:
        message += f" (and {others} more problem(s))"
    return where, message


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
        where, message = _describe(errors)
        raise InvalidRequest(
            f"{where}: {message}" if where else message, param=where or None
        ) from None
