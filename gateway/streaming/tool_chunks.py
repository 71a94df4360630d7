"""Tool calls on the wire: OpenAI's ``delta.tool_calls`` pieces, and whole calls in a message.

A stream sends each call's ``index``, ``id``, ``type`` and ``function.name`` once, in its first
piece, and then only ``function.arguments`` text; a non-streamed answer gathers the same pieces
into ``message.tool_calls`` (``content`` null when the model wrote nothing else).
"""

from __future__ import annotations

from typing import Any

from gateway.families.tool_formats.base import ToolCall, ToolCallDelta


def delta_tool_calls(delta: ToolCallDelta, legacy: bool = False) -> dict[str, Any]:
    """The ``delta`` of a chunk carrying one piece of one call (``legacy``: the deprecated
    ``function_call``, which has no index or id: one call per message)."""
    function: dict[str, Any] = {"arguments": delta.arguments}
    if delta.id is not None:
        function = {"name": delta.name, "arguments": delta.arguments}
    if legacy:
        return {"function_call": function}
    call: dict[str, Any] = {"index": delta.index}
    if delta.id is not None:
        call["id"] = delta.id
        call["type"] = "function"
    call["function"] = function
    return {"tool_calls": [call]}


class CallGatherer:
    """One choice's call pieces, gathered into whole calls in index order."""

    def __init__(self) -> None:
        self.heads: dict[int, tuple[str, str]] = {}
        self.arguments: dict[int, list[str]] = {}

    def add(self, delta: ToolCallDelta) -> None:
        if delta.id is not None:
            self.heads[delta.index] = (delta.id, delta.name or "")
        self.arguments.setdefault(delta.index, []).append(delta.arguments)

    def calls(self) -> list[ToolCall]:
        return [
            ToolCall(*self.heads[i], "".join(self.arguments.get(i, []))) for i in sorted(self.heads)
        ]


def message(
    text: str,
    calls: list[ToolCall] | None = None,
    legacy: bool = False,
    reasoning: str | None = None,
) -> dict[str, Any]:
    """An assistant message: its content and, when it made any, its tool calls (``legacy``:
    the one ``function_call`` of the deprecated ``functions`` API); a reasoning model's
    reasoning as ``reasoning_content`` (vLLM's field), the content then null when empty."""
    if reasoning is not None:
        body = message(text if text else "", calls, legacy)
        if not text:
            body["content"] = None
        return {**body, "reasoning_content": reasoning}
    if not calls:
        return {"role": "assistant", "content": text, "refusal": None}
    if legacy:
        call = calls[0]
        return {
            "role": "assistant",
            "content": text if text.strip() else None,
            "refusal": None,
            "function_call": {"name": call.name, "arguments": call.arguments},
        }
    return {
        "role": "assistant",
        "content": text if text.strip() else None,
        "refusal": None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ],
    }
