"""The Responses endpoint's alias map: chat's places as this request sent them."""

from __future__ import annotations

from gateway.pipeline.responses_names import ResponsesNames


def test_chat_messages_are_named_by_where_they_came_from() -> None:
    names = ResponsesNames([("instructions",), ("previous_response_id",), ("input", 0)])
    names.speaking_chat = True
    assert names(("messages", 2, "content", 1, "image_url")) == (
        "input",
        0,
        "content",
        1,
        "image_url",
    )
    assert names(("messages", 1)) == ("previous_response_id",)
    assert names(("messages",)) == ("input",)
    assert names(("messages", 9)) == ("input", 9)  # no origin known: input, as sent


def test_chats_own_fields_get_the_responses_names() -> None:
    names = ResponsesNames(speaking_chat=True)
    assert names(("max_completion_tokens",)) == ("max_output_tokens",)
    assert names(("response_format", "json_schema")) == ("text", "format", "json_schema")
    assert names(("tools", 2, "function", "parameters")) == ("tools", 2, "parameters")
    assert names(("tool_choice", "function", "name")) == ("tool_choice", "name")
    assert names(("temperature",)) == ("temperature",)


def test_the_requests_own_refusals_are_left_as_they_are() -> None:
    """Before the request becomes chat's, a place is the Responses API's already: a refused
    ``max_tokens`` (chat's spelling, sent here) stays ``max_tokens``."""
    names = ResponsesNames()
    assert names(("max_tokens",)) == ("max_tokens",)
    assert names(("messages",)) == ("messages",)
