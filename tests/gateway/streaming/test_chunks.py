import json

from gateway.families.events import TextDelta
from gateway.protocol.common import UsageCounts
from gateway.streaming.chunks import DONE_FRAME, ChunkWriter, completion_body


def parse(frame: bytes) -> dict:
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    return json.loads(frame[6:-2])


def test_content_chunk_is_valid_json_with_escaped_text() -> None:
    writer = ChunkWriter("chatcmpl-1", "m", created=5)
    chunk = parse(writer.content(TextDelta('quote " newline \n unicode é </script>')))
    assert chunk == {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 5,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {"content": 'quote " newline \n unicode é </script>'},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    }


def test_role_finish_and_usage_chunks() -> None:
    writer = ChunkWriter("chatcmpl-1", "m", created=5)
    assert parse(writer.role())["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert parse(writer.finish_chunk("length"))["choices"][0]["finish_reason"] == "length"
    usage = parse(writer.usage(UsageCounts(3, 4, cached_tokens=2)))
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 2},
    }
    assert DONE_FRAME == b"data: [DONE]\n\n"


def test_completion_body_shape() -> None:
    body = completion_body("id1", "m", ["hi"], ["stop"], UsageCounts(1, 2))
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "hi", "refusal": None}
    two = completion_body("id2", "m", ["a", "b"], ["stop", "length"], UsageCounts(2, 4))
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in two["choices"]] == [
        (0, "a", "stop"),
        (1, "b", "length"),
    ]
    assert body["usage"]["total_tokens"] == 3
    assert "prompt_tokens_details" not in body["usage"]
