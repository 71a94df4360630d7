"""Llama 3.1 / 3.2 JSON tool calls: ``{"name": ..., "parameters": {...}}`` as the whole answer.

Meta's template for custom tools (``tools_in_user_message``, its default): the system header
opens with ``Environment: ipython`` and the knowledge dates; the first user message is prefixed
with the instruction and each tool as indented JSON; a call is the assistant's whole message,
a JSON object (optionally after ``<|python_tag|>``; several separated by ``;``, as vLLM's
``llama3_json`` parser reads them); a result is an ``ipython`` turn (``Turn.role == "tool"``,
which the Llama family renders under that header).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from gateway.families.base import Conversation
from gateway.families.tool_formats.base import ToolSpec, dumps
from gateway.families.tool_formats.parser import Markup, MarkupParser

SYSTEM_HEAD = "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024"
INSTRUCTION = (
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument name '
    "and its value}.Do not use variables.\n\n"
)
MARKUP = Markup(starts=("<|python_tag|>",), mode="sequence", json_at_start=True)


class Llama3Json:
    name = "llama3_json"

    def lower(self, conversation: Conversation, tools: Sequence[ToolSpec]) -> Conversation:
        system = conversation.system
        turns = list(conversation.turns)
        if tools:
            system = SYSTEM_HEAD + ("\n\n" + system.strip() if system else "")
            first = next((i for i, t in enumerate(turns) if t.role == "user"), None)
            listed = "".join(json.dumps(t.openai(), indent=4) + "\n\n" for t in tools)
            if first is not None:
                turns[first] = replace(turns[first], text=INSTRUCTION + listed + turns[first].text)
        for index, turn in enumerate(turns):
            if turn.tool_calls:
                calls = "; ".join(
                    dumps({"name": c.name, "parameters": c.arguments_object()})
                    for c in turn.tool_calls
                )
                text = (turn.text + "\n" if turn.text else "") + calls
                turns[index] = replace(turn, text=text, tool_calls=())
        return Conversation(system, tuple(turns))

    def parser(self, streaming: bool) -> MarkupParser:
        return MarkupParser(MARKUP, streaming)
