"""Where in a request something is, as steps: ``("messages", 3, "content", 1, "image_url")``.

An error keeps its place this way (``errors.GatewayError``) and is written as OpenAI's ``param``
(``messages[3].content[1].image_url``) only when its body is written, by the endpoint's
``FieldNames``: the Responses API says ``input[2]`` where the chat pipeline it reuses says
``messages[3]``, and the same mistake should read the same on both.
"""

from __future__ import annotations

import re
from typing import Protocol

__all__ = ["FieldNames", "Location", "Message", "Step", "location_of", "rendered", "same_names"]

Step = str | int
# Where in the request an error is: ("messages", 3, "content", 1, "image_url"). An endpoint
# names it as its own wire does (``FieldNames``) when the error body is written.
Location = tuple[Step, ...]
# An error message: text, or text and the places it names (each rendered like ``param``).
Message = str | tuple[str | Location, ...]


class FieldNames(Protocol):
    """How one endpoint names a place in the request (the Responses API says ``input[2]``
    where the chat pipeline it reuses says ``messages[3]``)."""

    def __call__(self, at: Location) -> Location: ...


def same_names(at: Location) -> Location:
    """The chat pipeline's own names: every endpoint whose wire they are."""
    return at


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def location_of(path: str) -> Location:
    """``"messages[3].content"`` as its steps; a path that does not read back the same (a key
    with brackets in it) stays one step."""
    steps: Location = tuple(int(index) if index else name for name, index in _STEP.findall(path))
    return steps if rendered(steps) == path else (path,)


def rendered(at: Location) -> str:
    """``("messages", 3, "content")`` as OpenAI's ``param`` writes it: ``messages[3].content``."""
    out: list[str] = []
    for step in at:
        out.append(f"[{step}]" if isinstance(step, int) else ("." if out else "") + step)
    return "".join(out)
