"""The one translation of pydantic's ``ValidationError`` into the gateway's 400.

Every place that validates a client's data with pydantic (a JSON body, a form, a Responses
input item, a Realtime client event, the chat request a Responses request becomes) reports
its failure here, so the same mistake reads the same on every endpoint: the most specific
problem (the union member that got furthest), at its location, with the union's other
members' failures at the same place joined by "or". The location is kept as steps
(``errors.Location``), so an endpoint that names fields differently renders it its own way
when the body is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from gateway.errors import InvalidRequest
from gateway.location import Location

__all__ = ["invalid_request", "location_in_request"]

# Location items pydantic adds for the member of a union it tried ("str",
# "list[tagged-union[...]]", a tagged union's tag "input_text"...): a Python type or a tag,
# not a field of the request.
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|list|dict|none)$|\[")
_SOURCES = frozenset({"query", "path", "header", "cookie", "body"})  # FastAPI's first step


def location_in_request(loc: Sequence[int | str], tags: frozenset[str] = frozenset()) -> Location:
    """``("messages", 0, "content", "list[...]", 1, "image_url", "image_url", "url")`` as
    ``("messages", 0, "content", 1, "image_url", "url")``: union members and ``tags`` left out,
    and a tagged union's tag (which pydantic repeats before the field of the same name) said
    once."""
    steps: list[int | str] = []
    previous: Any = None
    for item in loc:
        if isinstance(item, str) and (
            _UNION_MEMBER.search(item) or item == previous or item in tags
        ):
            continue
        previous = item
        steps.append(item)
    return tuple(steps)


def invalid_request(
    exc: ValidationError | Sequence[Mapping[str, Any]],
    at: Location = (),
    *,
    tags: frozenset[str] = frozenset(),
    code: str | None = None,
) -> InvalidRequest:
    """``exc`` as a 400 naming its place: inside ``at`` (where the validated object sits in
    the request), ``tags`` being union tags of that object to leave out of the path. ``exc``
    may be pydantic's error list (FastAPI's ``RequestValidationError.errors()``: its first
    step, ``query`` or ``path``, is where the field was, not part of its name)."""
    if isinstance(exc, ValidationError):
        errors: Sequence[Mapping[str, Any]] = exc.errors(include_url=False)
    else:
        errors = [
            {**e, "loc": tuple(e["loc"])[1:] if e["loc"] and e["loc"][0] in _SOURCES else e["loc"]}
            for e in exc
        ]
    places = [location_in_request(error["loc"], tags) for error in errors]
    where, message = _most_specific(errors, places)
    return InvalidRequest((at + where, ": ", message) if at + where else message,
                          param=(at + where) or None, code=code)  # fmt: skip


def _most_specific(
    errors: Sequence[Mapping[str, Any]], places: Sequence[Location]
) -> tuple[Location, str]:
    """The union member that got furthest, as (where, message); union members that fail at
    the same place are joined with "or"."""
    deepest = max(len(error["loc"]) for error in errors)
    index = next(i for i, error in enumerate(errors) if len(error["loc"]) == deepest)
    where = places[index]
    same_place = [e for e, place in zip(errors, places, strict=True) if place == where]
    message = " or ".join(dict.fromkeys(str(e.get("msg")) for e in same_place))
    # Failures at a place enclosing this one are the union's other members failing too.
    others = len({place for place in places if place != where[: len(place)]})
    if others:
        message += f" (and {others} more problem(s))"
    return where, message
