"""The explicit name -> tool-call format table (a family names its format by object)."""

from __future__ import annotations

from gateway.families.tool_formats.base import (
    ToolCall,
    ToolCallDelta,
    ToolFormat,
    ToolParser,
    ToolSpec,
)
from gateway.families.tool_formats.hermes import Hermes
from gateway.families.tool_formats.llama3 import Llama3Json
from gateway.families.tool_formats.mistral import Mistral

HERMES = Hermes()
LLAMA3_JSON = Llama3Json()
MISTRAL = Mistral()
TOOL_FORMATS: dict[str, ToolFormat] = {f.name: f for f in (HERMES, LLAMA3_JSON, MISTRAL)}

__all__ = [
    "HERMES",
    "LLAMA3_JSON",
    "MISTRAL",
    "TOOL_FORMATS",
    "ToolCall",
    "ToolCallDelta",
    "ToolFormat",
    "ToolParser",
    "ToolSpec",
]
