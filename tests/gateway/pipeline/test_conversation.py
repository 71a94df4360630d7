import pytest
from pydantic import ValidationError

from gateway.errors import InvalidRequest
from gateway.pipeline.conversation import parse_messages
from gateway.protocol.chat import ChatCompletionRequest


def parse(messages: list[dict]):
    return parse_messages(ChatCompletionRequest(model="m", messages=messages).messages)


def test_parts_become_text_and_ordered_image_urls() -> None:
    parsed = parse(
        [
            {"role": "developer", "content": "sys A"},
            {"role": "system", "content": [{"type": "text", "text": "sys B"}]},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "http://a/1.png"}},
                    {"type": "text", "text": "one"},
                    {"type": "text", "text": "two"},
                    {"type": "image_url", "image_url": {"url": "http://a/2.png"}},
                ],
            },
        ]
    )
    assert parsed.conversation.system == "sys A\nsys B"
    assert parsed.conversation.turns[0].text == "one\ntwo"
    assert parsed.conversation.turns[0].images == 2
    assert parsed.image_urls == ("http://a/1.png", "http://a/2.png")


def test_media_parts_keep_kind_order_and_place() -> None:
    parsed = parse(
        [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": "http://a/v.mp4"}},
                    {"type": "text", "text": "what happens?"},
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                    {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,AA=="}},
                ],
            }
        ]
    )
    kinds = [(m.kind, m.where) for m in parsed.media]
    assert kinds == [
        ("video", ("messages", 0, "content", 0)),
        ("audio", ("messages", 0, "content", 2)),
        ("audio", ("messages", 0, "content", 3)),
    ]
    assert parsed.media[1].data == "UklGRg==" and parsed.media[1].format == "wav"
    turn = parsed.conversation.turns[0]
    assert (turn.images, turn.videos, turn.audios) == (0, 1, 2)
    assert parsed.image_urls == ()


def test_unknown_part_type_is_refused_by_the_schema() -> None:
    with pytest.raises(ValidationError):
        parse([{"role": "user", "content": [{"type": "input_video", "video": {}}]}])


def test_images_in_assistant_messages_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="only allowed in user"):
        parse(
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "image_url", "image_url": {"url": "http://x"}}],
                },
                {"role": "user", "content": "hi"},
            ]
        )


def test_late_system_text_joins_the_system_prompt_and_system_only_is_the_user_turn() -> None:
    late = parse([{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}])
    assert late.conversation.system == "late" and len(late.conversation.turns) == 1
    alone = parse([{"role": "system", "content": "only system"}])
    assert alone.conversation.system is None
    assert alone.conversation.turns[0].role == "user"
    assert alone.conversation.turns[0].text == "only system"
    with pytest.raises(InvalidRequest):
        parse([{"role": "user", "content": ""}])
    with pytest.raises(InvalidRequest):
        parse([{"role": "system", "content": ""}])


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    "messages",
    [
        # No call was made at all.
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_9",
                                              "content": "42"}],
        # A call was made, under another id.
        [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [CALL]},
         {"role": "tool", "tool_call_id": "call_9", "content": "42"}],
    ],
)  # fmt: skip
def test_a_tool_message_must_answer_a_call_made_before(messages: list[dict]) -> None:
    """Issue 22 item 8: OpenAI answers 400 to a tool message answering an unknown call."""
    with pytest.raises(InvalidRequest) as refused:
        parse(messages)
    assert refused.value.param == f"messages[{len(messages) - 1}].tool_call_id"
    assert "call_9" in refused.value.message


def test_an_unknown_long_tool_call_id_is_not_echoed_whole() -> None:
    messages = [{"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "c" * 5000, "content": "42"}]  # fmt: skip
    with pytest.raises(InvalidRequest) as refused:
        parse(messages)
    assert len(refused.value.message) < 300 and "(5000 characters)" in refused.value.message


def test_answers_to_calls_made_before_are_accepted() -> None:
    second = {**CALL, "id": "call_2"}
    parsed = parse([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [CALL, second]},
        {"role": "tool", "tool_call_id": "call_2", "content": "b"},
        {"role": "tool", "tool_call_id": "call_1", "content": "a"},
    ])  # fmt: skip
    assert [t.tool_call_id for t in parsed.conversation.turns[2:]] == ["call_2", "call_1"]
