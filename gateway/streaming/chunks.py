"""OpenAI chat-completion bodies and stream chunks, built as bytes without pydantic.

The per-token chunk is a constant prefix, the JSON-escaped text and a constant suffix:
one ``json.dumps`` of a string per token instead of a model per token.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_never

from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import ChoiceDone, ReasoningDelta, TextDelta, ToolCallPiece
from gateway.families.tool_formats.base import ToolCall
from gateway.observability.ids import hex_id
from gateway.protocol.common import UsageCounts
from gateway.streaming.logprobs import chat_logprobs
from gateway.streaming.tool_chunks import delta_tool_calls, message

DONE_FRAME = b"data: [DONE]\n\n"


def new_completion_id() -> str:
    return f"chatcmpl-{hex_id()}"


def sse_frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class ChunkWriter:
    """Formats the SSE frames of one streamed completion (an ``sse.EventFormat``): the role
    chunk first, a chunk per piece, the finish chunk, the usage chunk when asked, ``[DONE]``."""

    done = DONE_FRAME

    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int | None = None,
        include_usage: bool = False,
        choices: int = 1,
        legacy_functions: bool = False,
    ) -> None:
        self.completion_id = completion_id
        # A request with the deprecated ``functions``: calls go as ``delta.function_call``.
        self.legacy_functions = legacy_functions
        self.model = model
        self.include_usage = include_usage
        self.choices = choices  # several: items come as ``Choice``s, each ending on its own
        self.created = created or int(time.time())
        head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": model,
        }
        head_json = json.dumps(head, separators=(",", ":"))[:-1]
        self._content_prefix = (
            "data: " + head_json + ',"choices":[{"index":0,"delta":{"content":'
        ).encode()
        # With include_usage, every chunk but the last carries "usage": null (OpenAI's rule).
        usage = b',"usage":null' if include_usage else b""
        self._content_suffix = b'},"logprobs":null,"finish_reason":null}]' + usage + b"}\n\n"

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        chunk = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None
        return sse_frame({**chunk, **extra})

    @property
    def start(self) -> bytes:
        return b"".join(self.role(index) for index in range(self.choices))

    def role(self, index: int = 0) -> bytes:
        delta = {"role": "assistant", "content": ""}
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
        return self._chunk([choice])

    def content(self, event: TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone) -> bytes:
        if type(event) is TextDelta and not event.choice and event.tokens is None:
            # Choice 0's plain text: the per-token fast path (a type test costs a third of a
            # class pattern); every other event goes through the closed ``match``.
            return self._content_prefix + json.dumps(event.text).encode() + self._content_suffix
        logprobs = None
        match event:
            case TextDelta(text, index, tokens):
                delta: dict[str, Any] = {"content": text}
                logprobs = chat_logprobs(tokens) if tokens is not None else None
            case ReasoningDelta(text, index, tokens):  # vLLM's field; no content in the delta
                delta = {"reasoning_content": text}
                logprobs = chat_logprobs(tokens) if tokens is not None else None
            case ToolCallPiece(call, index):
                delta = delta_tool_calls(call, self.legacy_functions)
            case ChoiceDone(outcome, index):
                return self.finish_chunk(outcome.finish_reason, index)
            case _:
                assert_never(event)
        return self._chunk(
            [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": None}]
        )

    def finish(self, outcome: Outcome) -> bytes:
        """The end: the finish chunk (several choices sent theirs already), then usage."""
        frames = self.finish_chunk(outcome.finish_reason) if self.choices == 1 else b""
        return frames + self.usage(outcome.usage) if self.include_usage else frames

    def finish_chunk(self, reason: str, index: int = 0) -> bytes:
        if self.legacy_functions and reason == "tool_calls":
            reason = "function_call"
        choice = {"index": index, "delta": {}, "logprobs": None, "finish_reason": reason}
        return self._chunk([choice])

    def usage(self, usage: UsageCounts) -> bytes:
        return self._chunk([], usage=usage.to_dict())


def response_object(
    object_type: str,
    completion_id: str,
    model: str,
    choices: list[dict[str, Any]],
    usage: UsageCounts,
) -> dict[str, Any]:
    """A non-streamed completion object (``chat.completion``, ``text_completion``)."""
    return {
        "id": completion_id,
        "object": object_type,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage.to_dict(),
    }


def completion_body(
    completion_id: str,
    model: str,
    texts: Sequence[str],
    finish_reasons: Sequence[str],
    usage: UsageCounts,
    logprobs: Sequence[Sequence[TokenLogprob]] | None = None,
    tool_calls: Sequence[list[ToolCall]] = (),
    legacy_functions: bool = False,
    reasoning: Sequence[str | None] = (),
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object, one choice per text (``logprobs``: each
    choice's tokens, when they were asked for; its calls, as the deprecated ``function_call``
    when the request sent ``functions``; ``reasoning``: each choice's reasoning, a reasoning
    model's, None where it wrote none)."""
    calls = list(tool_calls) or [[] for _ in texts]
    thoughts = list(reasoning) or [None for _ in texts]
    legacy = legacy_functions
    choices = [
        {
            "index": index,
            "message": message(text, calls[index], legacy, thoughts[index]),
            "logprobs": chat_logprobs(logprobs[index]) if logprobs is not None else None,
            "finish_reason": "function_call" if legacy and reason == "tool_calls" else reason,
        }
        for index, (text, reason) in enumerate(zip(texts, finish_reasons, strict=True))
    ]
    return response_object("chat.completion", completion_id, model, choices, usage)
