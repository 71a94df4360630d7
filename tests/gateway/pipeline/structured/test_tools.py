"""``tools`` / ``tool_choice`` (and the legacy ``functions``) as a plan: validated as OpenAI
validates them, with the forcing schema over *all* offered tools."""

from __future__ import annotations

import json

import jsonschema
import pytest

from gateway.errors import InvalidRequest
from gateway.families.registry import get_family
from gateway.guides.compile import compile_error
from gateway.pipeline.structured.tools import ToolPlan, calls_schema, tool_plan
from gateway.protocol.chat import ChatCompletionRequest

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/$defs/Unit"}},
            "required": ["city"],
            "$defs": {"Unit": {"enum": ["c", "f"]}},
        },
    },
}
ZONE = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": ZONE}}
NO_PARAMETERS = {"type": "function", "function": {"name": "ping"}}
TOOLS = [WEATHER, TIME, NO_PARAMETERS]
LLAVA = get_family("llava")


def request(**fields: object) -> ChatCompletionRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    return ChatCompletionRequest.model_validate(body)


def plan(**fields: object) -> ToolPlan:
    made = tool_plan(request(**fields), LLAVA)
    assert made is not None
    return made


def test_no_tools_no_plan() -> None:
    assert tool_plan(request(), LLAVA) is None


@pytest.mark.parametrize(
    ("choice", "mode"),
    [(None, "auto"), ("auto", "auto"), ("none", "none"), ("required", "required")],
)
def test_tool_choice_modes(choice: str | None, mode: str) -> None:
    made = plan(tools=TOOLS, tool_choice=choice)
    assert made.mode == mode
    assert made.rendered == (() if mode == "none" else made.tools)


def test_required_is_an_anyof_over_every_tool_in_an_array() -> None:
    schema = calls_schema(plan(tools=TOOLS, tool_choice="required"))
    assert compile_error_of(schema) is None
    assert schema["type"] == "array" and schema["minItems"] == 1
    names = [v["properties"]["name"]["enum"] for v in schema["items"]["anyOf"]]
    assert names == [["get_weather"], ["get_time"], ["ping"]]
    assert schema["$defs"] == {"Unit": {"enum": ["c", "f"]}}  # hoisted where $ref points
    valid = [{"name": "get_time", "arguments": {"zone": "CET"}},
             {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}]  # fmt: skip
    jsonschema.validate(valid, schema)
    for invalid in (
        [],
        [{"name": "get_time", "arguments": {}}],
        [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "k"}}],
        [{"name": "other", "arguments": {}}],
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(invalid, schema)


def test_without_parallel_calls_required_is_one_call() -> None:
    schema = calls_schema(plan(tools=TOOLS, tool_choice="required", parallel_tool_calls=False))
    assert "anyOf" in schema and "type" not in schema
    jsonschema.validate({"name": "ping", "arguments": {}}, schema)


def test_a_named_choice_forces_that_functions_parameters() -> None:
    made = plan(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    asked = made.guide()
    # Its guide is that tool's parameters, and an error in it names them (issue 27 item 8).
    assert asked is not None and asked.param == ("tools", 1, "function", "parameters")
    assert json.loads(asked.guide.text) == TIME["function"]["parameters"]


def test_required_blames_the_whole_on_tool_choice_and_lists_each_tool_as_a_suspect() -> None:
    made = plan(tools=TOOLS, tool_choice="required")
    asked = made.guide()
    assert asked is not None and asked.param == ("tool_choice",)
    suspects = made.suspects()
    assert [s.param for s in suspects] == [("tools", i, "function", "parameters") for i in range(3)]
    assert json.loads(suspects[1].guide.text) == TIME["function"]["parameters"]


def test_legacy_functions_map_onto_tools() -> None:
    functions = [WEATHER["function"], TIME["function"]]
    made = plan(functions=functions, function_call={"name": "get_weather"})
    assert (made.mode, made.named, made.param) == ("named", "get_weather", "function_call")
    assert plan(functions=functions, function_call="none").mode == "none"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"parallel_tool_calls": True}, "parallel_tool_calls"),
        ({"function_call": "auto"}, "function_call"),
        ({"tools": []}, "tools"),
        ({"tools": [TIME, TIME]}, "tools"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "tool_choice.function.name"),
        ({"functions": [TIME["function"]], "function_call": {"name": "nope"}},
         "function_call.name"),
        ({"tools": TOOLS, "functions": [TIME["function"]]}, "functions"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(fields: dict, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        tool_plan(request(**fields), LLAVA)
    assert refused.value.param == param


def test_a_family_without_a_format_refuses_tools() -> None:
    with pytest.raises(InvalidRequest) as refused:
        tool_plan(request(tools=TOOLS), get_family("blip2_opt"))
    assert refused.value.code == "unsupported_parameter" and refused.value.param == "tools"
    assert tool_plan(request(tools=TOOLS, tool_choice="none"), get_family("blip2_opt"))


def compile_error_of(schema: dict) -> str | None:
    return compile_error("json_schema", json.dumps(schema))
