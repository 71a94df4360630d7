"""Mistral tool calls (v3 tokenizer): ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}]``.

Mistral's template puts ``[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]`` before the last user
message, writes an assistant's calls as ``[TOOL_CALLS]`` and a JSON array (each call with a
9-character ``id``) and a result as ``[TOOL_RESULTS] {"content": ..., "call_id": ...}
[/TOOL_RESULTS]`` outside any ``[INST]``. Here the tool list opens the last user turn's text
(the family renders the ``[INST]`` around it) and results stay ``tool`` turns holding that
markup, which the family writes as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gateway.families.base import Conversation, Turn
from gateway.families.tool_formats.base import ToolSpec, dumps
from gateway.families.tool_formats.parser import Markup, MarkupParser

MARKUP = Markup(starts=("[TOOL_CALLS]",), mode="array")


def mistral_id(call_id: str) -> str:
    """Mistral's ids are 9 letters or digits: the last 9 of the OpenAI id's, padded."""
    kept = "".join(c for c in call_id if c.isalnum())[-9:]
    return kept.rjust(9, "0")


class Mistral:
    name = "mistral"

    def lower(self, conversation: Conversation, tools: Sequence[ToolSpec]) -> Conversation:
        turns: list[Turn] = []
        for turn in conversation.turns:
            if turn.role == "tool":
                result = {"content": turn.text, "call_id": mistral_id(turn.tool_call_id or "")}
                text = f"[TOOL_RESULTS] {dumps(result)}[/TOOL_RESULTS]"
                turns.append(replace(turn, text=text))
            elif turn.tool_calls:
                calls = [
                    {"name": c.name, "arguments": c.arguments_object(), "id": mistral_id(c.id)}
                    for c in turn.tool_calls
                ]
                text = (turn.text + " " if turn.text else "") + "[TOOL_CALLS] " + dumps(calls)
                turns.append(replace(turn, text=text, tool_calls=()))
            else:
                turns.append(turn)
        last = max((i for i, t in enumerate(turns) if t.role == "user"), default=None)
        if tools and last is not None:
            listed = dumps([t.openai() for t in tools])
            head = f"[AVAILABLE_TOOLS] {listed}[/AVAILABLE_TOOLS]"
            turns[last] = replace(turns[last], text=head + turns[last].text)
        return Conversation(conversation.system, tuple(turns))

    def parser(self, streaming: bool) -> MarkupParser:
        return MarkupParser(MARKUP, streaming)
