"""OpenAI's structured-output and tool wire types (request side): ``response_format``, ``tools``,
``tool_choice``, the legacy ``functions`` / ``function_call``, and the tool calls and results a
conversation may carry. No I/O and no logic beyond validation.

A function's ``parameters`` and a response format's ``schema`` are kept as the client sent
them (JSON objects); whether a grammar engine can compile them is the pipeline's question.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for function and schema names
MAX_TOOLS = 128  # OpenAI's limit on tools per request


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)


class JSONSchemaFormat(_Strict):
    name: str = Field(pattern=FUNCTION_NAME)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    """``text``, ``json_object`` or ``json_schema``; other types are refused by name."""

    type: str = "text"
    json_schema: JSONSchemaFormat | None = None


class FunctionDefinition(_Strict):
    name: str = Field(pattern=FUNCTION_NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDefinition(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class FunctionName(_Strict):
    name: str = Field(min_length=1)


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice
FunctionCallChoice = Literal["none", "auto"] | FunctionName


class FunctionCall(_Strict):
    """A call as an assistant message carries it: ``arguments`` is JSON text."""

    name: str = Field(min_length=1)
    arguments: str


class ToolCallMessage(_Strict):
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall
