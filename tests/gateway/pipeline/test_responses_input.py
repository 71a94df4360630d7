"""Responses input items -> stored items -> chat messages: every part kind, replayed
outputs, a tool loop's items (once chat carries tool calls), and where each message came
from."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidRequest
from gateway.pipeline import responses_input
from gateway.pipeline.responses_input import ChatMessages, normalise, to_chat

WAV = "data:audio/wav;base64,UklGRg=="


def test_a_string_is_one_user_message() -> None:
    (item,) = normalise("Hi")
    assert item["id"].startswith("msg_") and item["role"] == "user"
    assert item["content"] == [{"type": "input_text", "text": "Hi"}]


def test_every_part_kind_becomes_its_chat_part() -> None:
    items = normalise(
        [
            {"type": "message", "role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Look:"},
                    {"type": "input_image", "image_url": "https://x.test/a.png"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA==",
                     "detail": "original"},
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                    {"type": "input_file", "file_data": WAV, "filename": "a.wav"},
                    {"type": "input_file", "file_data": "data:video/mp4;base64,AA=="},
                ],
            },
            {"role": "assistant", "content": [{"type": "output_text", "text": "Seen.",
                                               "annotations": []}]},
        ]
    )  # fmt: skip
    out = ChatMessages()
    to_chat(items, out, None)
    system, user, assistant = out.messages
    assert system == {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}
    assert user["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "auto"}},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,AA==", "detail": "original"},
        },
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "audio_url", "audio_url": {"url": WAV}},
        {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AA=="}},
    ]
    assert assistant == {"role": "assistant", "content": "Seen."}
    assert out.origins == [("input", 0), ("input", 1), ("input", 2)]
    assert items[2]["content"] == [{"type": "output_text", "text": "Seen.", "annotations": []}]


def test_replayed_items_are_named_by_their_origin() -> None:
    out = ChatMessages()
    to_chat(normalise("first"), out, ("previous_response_id",))
    to_chat(normalise("second"), out, None)
    assert out.origins == [("previous_response_id",), ("input", 0)]


def test_a_tool_loop_refused_until_chat_carries_tool_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = normalise(
        [
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
            {"type": "function_call_output", "call_id": "c2",
             "output": [{"type": "input_text", "text": "sun"}]},
        ]
    )  # fmt: skip
    assert [i["id"][:3] for i in items] == ["msg", "fc_", "fc_", "fco", "fco"]
    monkeypatch.setattr(responses_input, "CHAT_TAKES_TOOL_CALLS", False)
    with pytest.raises(InvalidRequest) as refused:
        to_chat(items, ChatMessages(), None)
    assert refused.value.param == "input[1]" and refused.value.code == "unsupported_parameter"
    monkeypatch.setattr(responses_input, "CHAT_TAKES_TOOL_CALLS", True)
    out = ChatMessages()
    to_chat(items, out, None)
    _, calls, first, second = out.messages
    assert calls["role"] == "assistant" and calls["content"] is None
    assert [c["id"] for c in calls["tool_calls"]] == ["c1", "c2"]  # parallel: one turn
    assert calls["tool_calls"][0]["function"] == {"name": "weather", "arguments": "{}"}
    assert first == {"role": "tool", "tool_call_id": "c1", "content": "rain"}
    assert second == {"role": "tool", "tool_call_id": "c2", "content": "sun"}
    assert out.origins == [("input", 0), ("input", 1), ("input", 3), ("input", 4)]


def test_an_empty_input_list_is_refused() -> None:
    with pytest.raises(InvalidRequest) as refused:
        normalise([])
    assert refused.value.param == "input"


def test_an_item_type_that_is_not_a_string_is_a_400_not_a_crash() -> None:
    """The fuzzer's find: ``"type": []`` was looked up in a set (TypeError, a 500)."""
    with pytest.raises(InvalidRequest) as refused:
        normalise([{"type": [], "role": "user", "content": "hi"}])
    assert refused.value.code == "invalid_value"
