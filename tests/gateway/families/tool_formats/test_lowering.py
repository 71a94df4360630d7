"""A conversation with tools, an assistant's call and the tool's result, rendered per format as
the checkpoints' own chat templates write it (Qwen2.5's for Hermes, Meta's Llama 3.1 template
for custom tools, Mistral's v3 template), through the families that declare each format."""

from __future__ import annotations

from gateway.families.base import Conversation, Turn
from gateway.families.registry import get_family
from gateway.families.tool_formats.base import ToolCall, ToolSpec
from gateway.families.tool_formats.hermes import POSTAMBLE, PREAMBLE
from gateway.families.tool_formats.llama3 import INSTRUCTION, SYSTEM_HEAD

TOOL = ToolSpec(
    "get_weather",
    "Weather now",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TOOL_JSON = (
    '{"type": "function", "function": {"name": "get_weather", "description": "Weather now", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, '
    '"required": ["city"]}}}'
)
CALL = ToolCall("call_abc123def456", "get_weather", '{"city":"Paris"}')
CONVERSATION = Conversation(
    "Be brief.",
    (
        Turn("user", "Weather in Paris?"),
        Turn("assistant", "", tool_calls=(CALL,)),
        Turn("tool", '{"temp": 21}', tool_call_id=CALL.id),
        Turn("tool", '{"wind": 3}', tool_call_id="call_2"),
    ),
)


def rendered(family_name: str, conversation: Conversation = CONVERSATION) -> str:
    family = get_family(family_name)
    assert family.tool_format is not None
    return family.render(family.tool_format.lower(conversation, (TOOL,)))


def test_hermes_in_llava_onevisions_chatml() -> None:
    assert rendered("llava_onevision") == (
        "Be brief.\n\n" + PREAMBLE + "\n" + TOOL_JSON + POSTAMBLE + "\n\nWeather in Paris?"
        "<|im_end|><|im_start|>assistant\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
        # Consecutive results share one user turn, as Qwen2.5's template groups them.
        '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response>\n'
        '<tool_response>\n{"wind": 3}\n</tool_response>'
    )


def test_hermes_tools_text_is_qwens() -> None:
    assert PREAMBLE.startswith("# Tools\n\nYou may call one or more functions")
    assert POSTAMBLE.endswith(
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def test_llama3_json_in_mllamas_template() -> None:
    indented = (
        '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n'
        '        "description": "Weather now",\n        "parameters": {\n'
        '            "type": "object",\n            "properties": {\n'
        '                "city": {\n                    "type": "string"\n                }\n'
        '            },\n            "required": [\n                "city"\n            ]\n'
        "        }\n    }\n}"
    )
    header = "<|start_header_id|>{}<|end_header_id|>\n\n".format
    assert rendered("mllama") == (
        header("system") + SYSTEM_HEAD + "\n\nBe brief.<|eot_id|>"
        + header("user") + INSTRUCTION + indented + "\n\nWeather in Paris?<|eot_id|>"
        + header("assistant") + '{"name": "get_weather", "parameters": {"city": "Paris"}}'
        "<|eot_id|>" + header("ipython") + '{"temp": 21}<|eot_id|>'
        + header("ipython") + '{"wind": 3}<|eot_id|>' + header("assistant")
    )  # fmt: skip


def test_mistral_in_llava_nexts_inst_form() -> None:
    assert rendered("llava_next") == (
        "Be brief.\n\n[AVAILABLE_TOOLS] [" + TOOL_JSON + "][/AVAILABLE_TOOLS]Weather in Paris?"
        ' [/INST] [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, '
        '"id": "123def456"}]</s>'
        '[TOOL_RESULTS] {"content": "{\\"temp\\": 21}", "call_id": "123def456"}[/TOOL_RESULTS]'
        '[TOOL_RESULTS] {"content": "{\\"wind\\": 3}", "call_id": "0000call2"}[/TOOL_RESULTS]'
    )


def test_no_tools_offered_leaves_the_system_text_alone() -> None:
    family = get_family("llava_onevision")
    assert family.tool_format is not None
    lowered = family.tool_format.lower(CONVERSATION, ())
    assert lowered.system == "Be brief."
    assert "<tool_response>" in lowered.turns[-1].text  # history still in the format
