"""A chat request's structured output and tools, decided together before the prompt is built.

Tools and ``response_format`` meet here. A forced tool choice (``required``, named) and a
``response_format`` both want the one guide a Triton request carries: refused. ``auto`` tools
with a non-text ``response_format`` cannot both be enforced either (a schema guide forbids the
call markup, and no guide leaves the format unenforced): refused too, rather than one of them
silently not applied.
"""

from __future__ import annotations

from gateway.errors import InvalidRequest
from gateway.families.base import Conversation, Family
from gateway.families.tool_formats.base import dumps
from gateway.pipeline.structured.guides import Asked, requested_guide
from gateway.pipeline.structured.tools import ToolPlan
from gateway.protocol.chat import ChatCompletionRequest


def requested_output(request: ChatCompletionRequest, plan: ToolPlan | None) -> Asked | None:
    """The guide the request needs: its tool choice's, or its output format's."""
    output = requested_guide(request.response_format, request.model_extra)
    forced = plan.guide() if plan is not None else None
    if output is not None and plan is not None and plan.mode != "none":
        why = (
            f"tool_choice '{plan.mode}' forces a tool call"
            if forced is not None
            else "the model may answer with a tool call (tool_choice 'auto'), which a "
            "schema guide would forbid"
        )
        raise InvalidRequest(
            (
                "'",
                output.param,
                f"' cannot be enforced together with tools here: {why}; send "
                "tool_choice 'none' to constrain the answer, or drop the output format",
            ),
            param=output.param,
        )
    return forced or output


def lowered(conversation: Conversation, family: Family, plan: ToolPlan | None) -> Conversation:
    """The conversation with its tools, calls and results in the family's markup; their text
    checked for the family's reserved markers like any message text."""
    has_tool_turns = any(t.role == "tool" or t.tool_calls for t in conversation.turns)
    offered = plan.rendered if plan is not None else ()
    if not has_tool_turns and not offered:
        return conversation
    tool_format = family.tool_format
    if tool_format is None:
        raise InvalidRequest(
            f"model family '{family.name}' declares no tool-call format: a conversation with "
            "tool calls or tool results cannot be rendered for it",
            param="messages",
            code="unsupported_parameter",
        )
    texts = [dumps(t.openai()) for t in offered]
    texts += [c.name + c.arguments for t in conversation.turns for c in t.tool_calls]
    family.check_text(Conversation("\n".join(texts), ()))
    return tool_format.lower(conversation, offered)
