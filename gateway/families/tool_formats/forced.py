"""Parsers for output the gateway forced with guided decoding (``tool_choice`` ``required`` or
a named function): plain JSON, not the format's markup.

Named: the output *is* the arguments object (the guide is that function's ``parameters``
schema). Required: the output is ``{"name": ..., "arguments": {...}}`` for one of the offered
tools, or an array of them when parallel calls are allowed (the guide is the ``anyOf`` schema
``pipeline/structured/tools.py`` builds).
"""

from __future__ import annotations

from gateway.families.tool_formats.base import Piece, ToolCallDelta, new_call_id
from gateway.families.tool_formats.parser import Markup, MarkupParser

SINGLE = Markup(starts=(), mode="object", json_at_start=True)
PARALLEL = Markup(starts=(), mode="array", json_at_start=True)


def required_parser(parallel: bool, streaming: bool) -> MarkupParser:
    return MarkupParser(PARALLEL if parallel else SINGLE, streaming)


class NamedParser:
    """The whole output as the arguments of one call to ``name``."""

    def __init__(self, name: str, streaming: bool) -> None:
        self.name = name
        self.streaming = streaming
        self.id = new_call_id()
        self.calls = 0
        self.text: list[str] = []

    def feed(self, text: str) -> list[Piece]:
        if not text:
            return []
        if not self.streaming:
            self.text.append(text)
            return []
        if self.calls:
            return [ToolCallDelta(0, text)]
        self.calls = 1
        return [ToolCallDelta(0, text, self.id, self.name)]

    def close(self, cut: bool = False) -> list[Piece]:
        """The call, whole or (``cut``) with its arguments as far as they got."""
        if self.streaming and self.calls:
            return []
        self.calls = 1
        return [ToolCallDelta(0, "".join(self.text) or "{}", self.id, self.name)]
