"""Each format's parser on the texts its models write (from the formats' own documentation and
chat templates): text before a call, several calls, arguments streamed in pieces that join to
the non-streamed call, markup never in the content, malformed calls left as content."""

from __future__ import annotations

import json

import pytest

from gateway.families.tool_formats.base import Piece, ToolCallDelta, ToolParser
from gateway.families.tool_formats.forced import NamedParser, required_parser
from gateway.families.tool_formats.registry import HERMES, LLAMA3_JSON, MISTRAL

# (format, model output, content expected, calls expected as (name, arguments object)).
# Hermes / Qwen2.5: the template's own example shape, several blocks for parallel calls.
HERMES_TWO = (
    "I will look both up.\n<tool_call>\n"
    '{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA", '
    '"unit": "celsius"}}\n</tool_call>\n<tool_call>\n'
    '{"name": "get_temperature_date", "arguments": {"location": "San Francisco, CA, USA", '
    '"date": "2024-10-01", "unit": "celsius"}}\n</tool_call>'
)
# Llama 3.1: the JSON object as the whole answer (after <|python_tag|> or not), ';' between.
LLAMA_ONE = '{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}'
LLAMA_TWO = (
    '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; '
    '{"name": "b", "parameters": {"s": "semi;colon \\"quoted\\" }"}}'
)
# Mistral v3: [TOOL_CALLS] and a JSON array.
MISTRAL_TWO = (
    '[TOOL_CALLS] [{"name": "get_current_weather", "arguments": {"location": "Paris, France", '
    '"format": "celsius"}}, {"name": "get_time", "arguments": {"zone": "CET"}}]'
)
PLAIN = "No tools needed: 2 < 3 and <b>bold</b>."
CASES = [
    (
        HERMES, HERMES_TWO, "I will look both up.\n",
        [("get_current_temperature", {"location": "San Francisco, CA, USA", "unit": "celsius"}),
         ("get_temperature_date",
          {"location": "San Francisco, CA, USA", "date": "2024-10-01", "unit": "celsius"})],
    ),
    (HERMES, PLAIN, PLAIN, []),
    (LLAMA3_JSON, LLAMA_ONE, "", [("get_weather", {"city": "Paris", "days": [1, 2]})]),
    (LLAMA3_JSON, LLAMA_TWO, "", [("a", {"x": 1}), ("b", {"s": 'semi;colon "quoted" }'})]),
    (LLAMA3_JSON, "The answer is {not json}.", "The answer is {not json}.", []),
    (
        MISTRAL, "Let me check. " + MISTRAL_TWO, "Let me check. ",
        [("get_current_weather", {"location": "Paris, France", "format": "celsius"}),
         ("get_time", {"zone": "CET"})],
    ),
]  # fmt: skip
MARKUP = ("<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", '"name"')


def run(parser: ToolParser, pieces: list[str]) -> list[Piece]:
    out: list[Piece] = []
    for piece in pieces:
        out += parser.feed(piece)
    return out + parser.close()


def split(pieces: list[Piece]) -> tuple[str, list[tuple[str, object]], list[ToolCallDelta]]:
    """Content, the calls (name, decoded arguments) and the raw deltas."""
    content = "".join(p for p in pieces if isinstance(p, str))
    deltas = [p for p in pieces if isinstance(p, ToolCallDelta)]
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for delta in deltas:
        if delta.id is not None:
            assert delta.index not in names, "id and name are sent once"
            names[delta.index] = delta.name or ""
        assert delta.index in names, "a call's first piece carries its id and name"
        arguments[delta.index] = arguments.get(delta.index, "") + delta.arguments
    calls = [(names[i], json.loads(arguments[i])) for i in sorted(names)]
    return content, calls, deltas


@pytest.mark.parametrize(("tool_format", "text", "content", "calls"), CASES)
def test_the_whole_output_parses(tool_format, text, content, calls) -> None:
    got_content, got_calls, deltas = split(run(tool_format.parser(False), [text]))
    assert (got_content, got_calls) == (content, calls)
    assert len(deltas) == len(calls)  # not streamed: one piece per call
    assert [d.index for d in deltas] == list(range(len(calls)))


@pytest.mark.parametrize(("tool_format", "text", "content", "calls"), CASES)
def test_streamed_split_at_every_boundary_gives_the_same_answer(
    tool_format, text, content, calls
) -> None:
    whole = split(run(tool_format.parser(False), [text]))
    for cut in range(1, len(text)):
        got = split(run(tool_format.parser(True), [text[:cut], text[cut:]]))
        assert got[:2] == whole[:2], cut
        for marker in MARKUP:
            assert marker not in got[0] or marker in content, (cut, got[0])


@pytest.mark.parametrize(("tool_format", "text", "content", "calls"), CASES)
def test_streamed_a_character_at_a_time_sends_arguments_in_pieces(
    tool_format, text, content, calls
) -> None:
    got_content, got_calls, deltas = split(run(tool_format.parser(True), list(text)))
    assert (got_content, got_calls) == (content, calls)
    if calls:
        assert len(deltas) > len(calls)  # arguments came in more pieces than one per call


@pytest.mark.parametrize(
    ("tool_format", "text"),
    [
        (HERMES, 'Before <tool_call>{"name": "f", "arguments": {"a": </tool_call> after'),
        (HERMES, '<tool_call>{"arguments": {"a": 1}}</tool_call>'),  # no name
        (HERMES, '<tool_call>{"name": "f", "arguments": {"a": 1}'),  # cut off
        (MISTRAL, '[TOOL_CALLS] [{"name": 3, "arguments": {}}]'),
        (LLAMA3_JSON, '{"answer": 42, "unit": "m"}'),  # JSON, but not a call
    ],
)
def test_malformed_calls_are_content_as_written(tool_format, text: str) -> None:
    content, calls, _ = split(run(tool_format.parser(False), [text]))
    assert (content, calls) == (text, [])


def test_streamed_a_malformed_call_ends_and_the_rest_is_content() -> None:
    text = 'Hi <tool_call>{"name": "f", "arguments": {"a": </tool_call> after'
    pieces = run(HERMES.parser(True), list(text))
    content = "".join(p for p in pieces if isinstance(p, str))
    assert content.startswith("Hi ") and content.endswith("</tool_call> after")
    assert "<tool_call>" not in content  # what was sent as a call is not sent again


def test_blank_text_between_and_after_calls_is_not_content() -> None:
    content, calls, _ = split(run(HERMES.parser(True), list(HERMES_TWO + "\n\n")))
    assert content == "I will look both up.\n" and len(calls) == 2


def test_arguments_written_as_a_json_string_are_decoded() -> None:
    text = '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>'
    for streaming in (False, True):
        assert split(run(HERMES.parser(streaming), list(text)))[1] == [("f", {"a": 1})]


def test_forced_named_output_is_the_arguments() -> None:
    text = '{"city": "Paris", "unit": "celsius"}'
    whole = split(run(NamedParser("get_weather", False), [text]))
    streamed = split(run(NamedParser("get_weather", True), list(text)))
    assert whole[:2] == streamed[:2] == ("", [("get_weather", json.loads(text))])


@pytest.mark.parametrize("parallel", [True, False])
def test_forced_required_output_is_one_call_or_an_array(parallel: bool) -> None:
    one = '{"name": "f", "arguments": {"x": 1}}'
    text = f'[{one}, {{"name": "g", "arguments": {{}}}}]' if parallel else one
    expected = [("f", {"x": 1}), ("g", {})] if parallel else [("f", {"x": 1})]
    for cut in range(1, len(text)):
        got = split(run(required_parser(parallel, True), [text[:cut], text[cut:]]))
        assert got[:2] == ("", expected), cut
