"""Chat's field names as the Responses API names them: the alias map of ``/v1/responses``.

A Responses request reaches the model as a chat request (``responses_job.py``), so the chat
pipeline's refusals name chat's fields: ``messages[3].content[1]``, ``max_completion_tokens``,
``response_format``, ``tools[0].function.parameters``. Errors keep where they are as steps
(``errors.Location``); when the error body of a Responses request is written, each place is
renamed here, in the param and in the message alike, without reading the message's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.location import Location

__all__ = ["ResponsesNames"]

_RENAMED: dict[str | int, Location] = {
    "max_completion_tokens": ("max_output_tokens",),
    "max_tokens": ("max_output_tokens",),
    "response_format": ("text", "format"),
    "reasoning_effort": ("reasoning", "effort"),
}


@dataclass
class ResponsesNames:
    """``errors.FieldNames`` for one Responses request: ``origins[i]`` is where chat message
    ``i`` came from (``("input", 2)``, ``("instructions",)``, ``("previous_response_id",)``),
    filled in as the conversation is rebuilt."""

    origins: list[Location] = field(default_factory=list)
    # Set once the request has become a chat request: the errors raised before it (the
    # Responses API's own refusals, ``'max_tokens' is not a Responses API field``) name the
    # Responses fields already, and are left as they are.
    speaking_chat: bool = False

    def __call__(self, at: Location) -> Location:
        if not at or not self.speaking_chat:
            return at
        head, rest = at[0], at[1:]
        if head == "messages":
            index = rest[0] if rest else None
            if isinstance(index, int) and index < len(self.origins):
                return self.origins[index] + rest[1:]
            return ("input", *rest)
        if head in _RENAMED:
            return _RENAMED[head] + rest
        # Chat nests a function's fields under ``function``; the Responses API does not.
        if head == "tools" and len(rest) >= 2 and rest[1] == "function":
            return (head, rest[0], *rest[2:])
        if head == "tool_choice" and rest[:1] == ("function",):
            return (head, *rest[1:])
        return at
