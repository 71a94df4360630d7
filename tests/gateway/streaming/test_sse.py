"""The chat SSE body: OpenAI's chunk sequence, with frames that are ready together in one body."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

from gateway.errors import UpstreamFailed
from gateway.families.calls import Outcome
from gateway.families.events import Done, RelayEvent, TextDelta
from gateway.protocol.common import UsageCounts
from gateway.streaming.chunks import ChunkWriter
from gateway.streaming.sse import stream_events


def frames_of(body: bytes) -> list[str]:
    """The ``data:`` payloads of one body, in order."""
    assert body.endswith(b"\n\n")
    return [part.removeprefix("data: ") for part in body.decode().split("\n\n") if part]


def event(item: str | Outcome) -> RelayEvent:
    return TextDelta(item) if isinstance(item, str) else Done(item)


async def bodies(
    first: str | Outcome, rest: list[str | Outcome | Exception], include_usage: bool = True
) -> list[bytes]:
    async def events() -> AsyncGenerator[RelayEvent, None]:
        for item in rest:
            if isinstance(item, Exception):
                raise item
            yield event(item)

    writer = ChunkWriter("chatcmpl-test", "m", created=1, include_usage=include_usage)
    return [body async for body in stream_events(event(first), events(), writer)]


async def test_role_rides_with_the_first_token_and_the_end_is_one_body() -> None:
    usage = UsageCounts(prompt_tokens=3, completion_tokens=2)
    sent = await bodies("Hel", ["lo", Outcome("stop", usage)])
    assert len(sent) == 3  # (role + "Hel"), "lo", (finish + usage + [DONE])
    first, middle, last = (frames_of(body) for body in sent)
    assert [json.loads(f)["choices"][0]["delta"] for f in first] == [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
    ]
    assert json.loads(middle[0])["choices"][0]["delta"] == {"content": "lo"}
    finish, usage_frame, done = last
    assert json.loads(finish)["choices"][0]["finish_reason"] == "stop"
    assert json.loads(usage_frame)["usage"]["total_tokens"] == 5
    assert done == "[DONE]"


async def test_an_answer_without_text_is_one_body() -> None:
    sent = await bodies(Outcome("length", UsageCounts(1, 0)), [], include_usage=False)
    assert len(sent) == 1
    role, finish, done = frames_of(sent[0])
    assert json.loads(role)["choices"][0]["delta"]["role"] == "assistant"
    assert json.loads(finish)["choices"][0]["finish_reason"] == "length"
    assert done == "[DONE]"


async def test_a_failure_after_the_first_text_sends_the_error_then_done() -> None:
    sent = await bodies("Hel", [UpstreamFailed("Triton went away")])
    role, text, error, done = frames_of(b"".join(sent))
    assert json.loads(role)["choices"][0]["delta"]["role"] == "assistant"
    assert json.loads(text)["choices"][0]["delta"] == {"content": "Hel"}
    assert json.loads(error)["error"]["message"] == "Triton went away"
    assert done == "[DONE]"
