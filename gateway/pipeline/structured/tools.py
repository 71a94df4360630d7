"""A chat request's tools: which are offered, how the choice is enforced, how output is read.

``tool_choice`` (or the legacy ``function_call``) decides:

- ``none``: the tools are not rendered and the output is plain content;
- ``auto``: the tools are rendered in the family's format and the output is parsed in it;
- ``required``: rendered, and guided decoding forces a call to one of *all* offered tools
  (an ``anyOf`` over them; an array of them when ``parallel_tool_calls`` is not false), not
  to the first one only;
- a named function: rendered, and guided decoding forces that function's arguments.

Forced output is plain JSON (``tool_formats/forced.py`` reads it), as vLLM forces it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from gateway.errors import InvalidRequest
from gateway.families.base import Family
from gateway.families.calls import Guide
from gateway.families.tool_formats.base import ToolParser, ToolSpec
from gateway.families.tool_formats.forced import NamedParser, required_parser
from gateway.families.tool_formats.parser import FirstCallOnly
from gateway.location import Location
from gateway.pipeline.structured.guides import Asked
from gateway.protocol.chat import ChatCompletionRequest
from gateway.protocol.structured import (
    FunctionCallChoice,
    FunctionDefinition,
    FunctionName,
    ToolChoice,
)

Mode = Literal["none", "auto", "required", "named"]
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    """What the request's tools become."""

    tools: tuple[ToolSpec, ...]  # offered (and rendered unless the mode is none)
    mode: Mode
    named: str | None = None
    parallel: bool = True
    param: str = "tool_choice"  # the field that chose (legacy: function_call)
    tools_param: str = "tools"  # the field that offered (legacy: functions)

    @property
    def rendered(self) -> tuple[ToolSpec, ...]:
        return () if self.mode == "none" else self.tools

    def guide(self) -> Asked | None:
        """The guide that forces a call, for ``required`` and named choices; a named tool's
        guide is its own ``parameters``, and is blamed on them."""
        if self.mode == "named":
            index = next(i for i, t in enumerate(self.tools) if t.name == self.named)
            schema = json.dumps(_parameters(self.tools[index]))
            return Asked(Guide("json_schema", schema), self.parameters_param(index))
        if self.mode == "required":
            return Asked(Guide("json_schema", json.dumps(calls_schema(self))), (self.param,))
        return None

    def suspects(self) -> list[Asked]:
        """Each tool's ``parameters`` as a guide of its own: when the ``required`` guide they
        make together does not compile, the first that does not alone is to blame."""
        if self.mode != "required":
            return []
        return [
            Asked(Guide("json_schema", json.dumps(_parameters(tool))), self.parameters_param(i))
            for i, tool in enumerate(self.tools)
        ]

    def parameters_param(self, index: int) -> Location:
        """Where tool ``index``'s parameters are in the request."""
        if self.tools_param == "functions":
            return ("functions", index, "parameters")
        return ("tools", index, "function", "parameters")

    def parser(self, family: Family, streaming: bool) -> Callable[[], ToolParser] | None:
        """Makes one choice's parser (None: the output is content as it is)."""
        if self.mode == "none":
            return None
        if self.mode == "named":
            name = self.named or ""
            return lambda: NamedParser(name, streaming)
        if self.mode == "required":
            parallel = self.parallel
            return lambda: required_parser(parallel, streaming)
        tool_format = family.tool_format
        assert tool_format is not None  # checked by tool_plan
        if not self.parallel:
            return lambda: FirstCallOnly(tool_format.parser(streaming))
        return lambda: tool_format.parser(streaming)


def tool_plan(request: ChatCompletionRequest, family: Family) -> ToolPlan | None:
    """The request's tools, validated as OpenAI validates them; None when it has none."""
    legacy = request.functions is not None or request.function_call is not None
    if legacy and (request.tools is not None or request.tool_choice is not None):
        raise InvalidRequest(
            "send either 'tools' or the deprecated 'functions', not both",
            param="functions" if request.functions is not None else "function_call",
        )
    if legacy:
        plan = _plan(request.functions, request.function_call, "functions", "function_call")
    else:
        functions = None if request.tools is None else [t.function for t in request.tools]
        plan = _plan(functions, request.tool_choice, "tools", "tool_choice")
    if request.parallel_tool_calls is not None and plan is None:
        raise InvalidRequest(
            "'parallel_tool_calls' is only allowed when 'tools' are specified",
            param="parallel_tool_calls",
        )
    if plan is None:
        return None
    if request.parallel_tool_calls is False or legacy:  # the deprecated API: one call
        plan = replace(plan, parallel=False)
    if plan.mode != "none" and family.tool_format is None:
        raise InvalidRequest(
            f"model family '{family.name}' declares no tool-call format: tools cannot be "
            "offered to this model",
            param=plan.param if plan.mode != "auto" else "tools",
            code="unsupported_parameter",
        )
    return plan


def _plan(
    functions: Sequence[FunctionDefinition] | None,
    choice: ToolChoice | FunctionCallChoice | None,
    tools_param: str,
    choice_param: str,
) -> ToolPlan | None:
    if functions is None:
        if choice is not None:
            raise InvalidRequest(
                f"'{choice_param}' is only allowed when '{tools_param}' are specified",
                param=choice_param,
            )
        return None
    if not functions:
        raise InvalidRequest(f"'{tools_param}' is an empty list", param=tools_param)
    specs = tuple(ToolSpec(f.name, f.description, f.parameters or {}, f.strict) for f in functions)
    names = [s.name for s in specs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise InvalidRequest(f"two tools are named {duplicate!r}", param=tools_param)
    if choice is None or choice == "auto":
        return ToolPlan(specs, "auto", param=choice_param, tools_param=tools_param)
    if isinstance(choice, str):
        mode: Mode = "required" if choice == "required" else "none"
        return ToolPlan(specs, mode, param=choice_param, tools_param=tools_param)
    legacy = isinstance(choice, FunctionName)  # function_call: {"name": ...}
    named = choice.name if isinstance(choice, FunctionName) else choice.function.name
    if named not in names:
        where = f"{choice_param}.name" if legacy else f"{choice_param}.function.name"
        raise InvalidRequest(
            f"{choice_param} names the function {named!r}, which is not among the "
            f"{tools_param} offered ({', '.join(names)})",
            param=where,
        )
    return ToolPlan(specs, "named", named, param=choice_param, tools_param=tools_param)


def _parameters(tool: ToolSpec) -> dict[str, Any]:
    return dict(tool.parameters) or dict(EMPTY_PARAMETERS)


def calls_schema(plan: ToolPlan) -> dict[str, Any]:
    """``{"name": one of the tools, "arguments": its parameters}`` for any offered tool; an
    array of at least one such call when parallel calls are allowed. Each tool's ``$defs``
    move to the root, where their ``$ref``s point."""
    defs: dict[str, Any] = {}
    variants = []
    for tool in plan.tools:
        parameters = _parameters(tool)
        for name, definition in parameters.pop("$defs", {}).items():
            if defs.setdefault(name, definition) != definition:
                raise InvalidRequest(
                    f"two tools define '$defs/{name}' differently; tool_choice 'required' "
                    "needs them to agree",
                    param="tools",
                )
        variants.append(
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": [tool.name]},
                    "arguments": parameters,
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    call: dict[str, Any] = {"anyOf": variants}
    schema = {"type": "array", "minItems": 1, "items": call} if plan.parallel else call
    return {**schema, "$defs": defs} if defs else schema
