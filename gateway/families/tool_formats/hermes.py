"""Hermes / Qwen2.5 tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

The format of Qwen2.5's and NousResearch Hermes 2 Pro's chat templates (and so of Qwen2-based
checkpoints such as LLaVA-OneVision's): the tools go at the end of the system text inside
``<tools></tools>``, one JSON object a line; each call is a JSON object inside ``<tool_call>``
tags (several calls, several blocks); results come back in a user turn, each inside
``<tool_response>`` tags, consecutive results in one turn. The texts below are the template's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gateway.families.base import Conversation, Turn
from gateway.families.tool_formats.base import ToolSpec, dumps
from gateway.families.tool_formats.parser import Markup, MarkupParser

PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
MARKUP = Markup(starts=("<tool_call>",), mode="object", end="</tool_call>")


def tools_text(tools: Sequence[ToolSpec]) -> str:
    return PREAMBLE + "".join("\n" + dumps(tool.openai()) for tool in tools) + POSTAMBLE


class Hermes:
    name = "hermes"

    def lower(self, conversation: Conversation, tools: Sequence[ToolSpec]) -> Conversation:
        system = conversation.system
        if tools:
            system = (system.strip() + "\n\n" if system else "") + tools_text(tools)
        turns: list[Turn] = []
        previous = ""
        for turn in conversation.turns:
            if turn.role == "tool":
                block = f"<tool_response>\n{turn.text}\n</tool_response>"
                if previous == "tool":  # consecutive results share one user turn
                    turns[-1] = replace(turns[-1], text=turns[-1].text + "\n" + block)
                else:
                    turns.append(Turn("user", block))
            elif turn.tool_calls:
                blocks = [
                    "<tool_call>\n"
                    + dumps({"name": call.name, "arguments": call.arguments_object()})
                    + "\n</tool_call>"
                    for call in turn.tool_calls
                ]
                text = "\n".join(([turn.text] if turn.text else []) + blocks)
                turns.append(replace(turn, text=text, tool_calls=()))
            else:
                turns.append(turn)
            previous = turn.role
        return Conversation(system, tuple(turns))

    def parser(self, streaming: bool) -> MarkupParser:
        return MarkupParser(MARKUP, streaming)
