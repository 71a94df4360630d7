"""Read a multipart form upload with a byte cap, answering OpenAI-style 4xx errors.

FastAPI's own ``Form``/``File`` parameters answer 422 with ``{"detail": ...}`` and read the body
without a cap; here the body is streamed into Starlette's multipart parser and refused with
``request_too_large`` as soon as it passes the cap (before it is all received). Repeated fields
(``timestamp_granularities[]``) come back as lists under their name without the brackets, and
an object's keys (``chunking_strategy[type]``, as the OpenAI SDK writes a dict into a form) as
one dict under its name.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from gateway.errors import InvalidRequest, RequestTooLarge
from gateway.observability.record import record_of

MAX_FIELDS = 32


@dataclass(frozen=True)
class FormUpload:
    """The text fields (lists for repeated ones) and the one uploaded file's bytes."""

    fields: dict[str, Any]
    file: bytes | None
    filename: str | None


async def _capped(request: Request, max_bytes: int) -> AsyncGenerator[bytes, None]:
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestTooLarge(f"request body is over {max_bytes} bytes")
        yield chunk
    record_of(request.state).request_bytes = size


async def read_form(request: Request, max_bytes: int, file_field: str = "file") -> FormUpload:
    """Parse ``multipart/form-data`` of at most ``max_bytes`` with at most one file."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise InvalidRequest(
            "expected a multipart/form-data body with the audio under 'file'",
            code="invalid_content_type",
        )
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise RequestTooLarge(f"request body is over {max_bytes} bytes")
    parser = MultiPartParser(
        request.headers, _capped(request, max_bytes), max_files=1, max_fields=MAX_FIELDS
    )
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise InvalidRequest(f"the multipart body cannot be read: {exc.message}") from None
    try:
        return await _collect(form, file_field)
    finally:
        await form.close()


async def _collect(form: Any, file_field: str) -> FormUpload:
    fields: dict[str, Any] = {}
    upload: UploadFile | None = None
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            if key != file_field:
                raise InvalidRequest(f"unexpected file field '{key}'", param=key)
            upload = value
            continue
        if key.endswith("[]"):
            fields.setdefault(key[:-2], []).append(value)
        elif key.endswith("]") and "[" in key:
            name, _, inner = key[:-1].partition("[")
            table = fields.setdefault(name, {})
            if not isinstance(table, dict):
                raise InvalidRequest(
                    f"'{name}' is given both as a value and as an object", param=name
                )
            table[inner] = value
        else:
            if isinstance(fields.get(key), dict):
                raise InvalidRequest(
                    f"'{key}' is given both as a value and as an object", param=key
                )
            fields[key] = value
    if upload is None:
        if file_field in fields:
            raise InvalidRequest(f"'{file_field}' must be a file upload", param=file_field)
        return FormUpload(fields, None, None)
    return FormUpload(fields, await upload.read(), upload.filename)
