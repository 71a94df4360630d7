import pytest

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


def test_unsupported_part_is_a_400_naming_the_part() -> None:
    with pytest.raises(InvalidRequest) as info:
        parse(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
                    ],
                }
            ]
        )
    assert info.value.param == "messages[0].content[0]"


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


def test_system_after_turns_and_empty_messages_are_refused() -> None:
    with pytest.raises(InvalidRequest):
        parse([{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}])
    with pytest.raises(InvalidRequest):
        parse([{"role": "user", "content": ""}])
    with pytest.raises(InvalidRequest):
        parse([{"role": "system", "content": "only system"}])
