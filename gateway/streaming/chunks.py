"""OpenAI chat-completion bodies and stream chunks, built as bytes without pydantic.

The per-token chunk is a constant prefix, the JSON-escaped text and a constant suffix:
one ``json.dumps`` of a string per token instead of a model per token.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

DONE_FRAME = b"data: [DONE]\n\n"


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class UsageCounts:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage


def sse_frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class ChunkWriter:
    """Formats the SSE frames of one streamed completion."""

    def __init__(self, completion_id: str, model: str, created: int | None = None) -> None:
        self.completion_id = completion_id
        self.model = model
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
        self._content_suffix = b'},"logprobs":null,"finish_reason":null}]}\n\n'

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return sse_frame(
            {
                "id": self.completion_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": choices,
                **extra,
            }
        )

    def role(self) -> bytes:
        delta = {"role": "assistant", "content": ""}
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])

    def content(self, text: str) -> bytes:
        return self._content_prefix + json.dumps(text).encode() + self._content_suffix

    def finish(self, reason: str) -> bytes:
        return self._chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}])

    def usage(self, usage: UsageCounts) -> bytes:
        return self._chunk([], usage=usage.to_dict())


def completion_body(
    completion_id: str, model: str, text: str, finish_reason: str, usage: UsageCounts
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage.to_dict(),
    }


def error_frame(body: dict[str, Any]) -> bytes:
    """An error after the stream has started: OpenAI sends it as a data event."""
    return sse_frame(body)
